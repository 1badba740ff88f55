"""phasor_client's shared-memory session (phasor_client/shm.py) against a
real phasor-server started with --system_shared_memory=true.

Checked: apply_rope, encode_panel and encode_frame through shared memory
equal the native calls of the same profile byte for byte (every float
dtype of RoPE, grouped-query keys, continuous positions; panels with
missing values, per-series zones, states in and out); the region is reused
across calls and replaced by a larger one when a call does not fit; results
are views of the region unless copy=True; close() (of the session or of the
EncoderClient) leaves no /dev/shm object and no registration on the server;
a server without shared memory, a key outside its prefix and a bad input
raise PhasorError with a clear message and leave nothing behind.
"""

import glob
import os
import shutil
import tempfile
import unittest

import grpc
import numpy as np

import harness
from phasor_client import PhasorError

TIMEOUT_S = harness.CLIENT_TIMEOUT_S
NS = 1_000_000_000
START_NS = 1_704_067_200 * NS

PROFILES = """
profile { name: "rope" spec { rope { rotary_dim: 32 } } }
profile {
  name: "yarn"
  spec { rope { scaling { yarn { factor: 4 original_max_position_embeddings: 64 } } } }
}
profile {
  name: "panel"
  spec {
    temporal {
      time { dim: 8 }
      gaps { include_mask: true }
      calendar { fields: [HOUR_OF_DAY, DAY_OF_WEEK, MONTH_OF_YEAR] }
    }
  }
}
"""


def own_objects():
    """This process's shared-memory objects under the default prefix."""
    return sorted(glob.glob(f"/dev/shm/phasor_{os.getpid()}_*"))


def panel_inputs(num_series, rows_per_series, seed):
    """Timestamps [T] int64 ns (irregular), values [T, 3] with NaNs,
    offsets [S+1]."""
    rng = np.random.default_rng(seed)
    rows = num_series * rows_per_series
    steps = rng.integers(60, 7200, size=rows) * NS
    timestamps = np.empty(rows, dtype=np.int64)
    for s in range(num_series):
        block = slice(s * rows_per_series, (s + 1) * rows_per_series)
        timestamps[block] = (START_NS + s * 7919 * NS
                             + np.cumsum(steps[block]))
    values = rng.standard_normal((rows, 3))
    values[rng.random((rows, 3)) < 0.3] = np.nan
    offsets = np.arange(0, rows + 1, rows_per_series, dtype=np.int64)
    return timestamps, values, offsets


class SharedMemoryClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="phasor-shm-client-")
        profiles = os.path.join(cls.tmp, "profiles.txtpb")
        with open(profiles, "w") as f:
            f.write(PROFILES)
        cls.server = harness.Server([f"--profiles={profiles}",
                                     "--system_shared_memory=true"]).start()
        cls.client = cls.server.client(deadline_seconds=TIMEOUT_S)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.client.close()
        finally:
            cls.server.stop()
            cls.server.kill()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def tearDown(self):
        # Every test closes what it opened: no object of this process left
        # and no region registered on the server.
        self.assertEqual(own_objects(), [])
        with self.client.shared_memory() as probe:
            self.assertEqual(probe.status(), {})

    def assert_same_bytes(self, got, want):
        self.assertEqual(got.dtype, want.dtype)
        self.assertEqual(got.shape, want.shape)
        self.assertEqual(np.ascontiguousarray(got).tobytes(),
                         np.ascontiguousarray(want).tobytes())

    # -- results equal the native calls ---------------------------------------

    def test_rope_matches_apply_rope_in_every_float_type(self):
        rng = np.random.default_rng(1)
        query = rng.standard_normal((2, 4, 24, 32)).astype(np.float32)
        key = rng.standard_normal((2, 2, 24, 32)).astype(np.float32)
        bits = (query.view(np.uint32) >> 16).astype(np.uint16)
        cases = [
            ("fp32 bhtd with a grouped key", dict(query=query, key=key), {}),
            ("fp16 bhtd", dict(query=query.astype(np.float16)), {}),
            ("fp64 bhtd", dict(query=query.astype(np.float64)), {}),
            ("bf16 bits", dict(query=bits), {"dtype": "bfloat16"}),
            ("thd, continuous positions",
             dict(query=query[0].transpose(1, 0, 2).copy(),
                  positions=np.linspace(0.0, 40.5, 24)),
             {"tensor_layout": "thd"}),
            ("bthd, per-row positions",
             dict(query=query.transpose(0, 2, 1, 3).copy(),
                  positions=np.stack([np.arange(24), np.arange(24) + 7])),
             {"tensor_layout": "bthd"}),
        ]
        with self.client.shared_memory() as shm:
            for name, arrays, options in cases:
                for profile in ("rope", "yarn"):
                    with self.subTest(case=name, profile=profile):
                        want = self.client.apply_rope(
                            **arrays, profile=profile, **options)
                        got = shm.apply_rope(**arrays, profile=profile,
                                             **options)
                        self.assert_same_bytes(got.query, want.query)
                        if "key" in arrays:
                            self.assert_same_bytes(got.key, want.key)
                        else:
                            self.assertIsNone(got.key)
                        self.assertEqual(got.attention_factor,
                                         want.attention_factor)

    def test_panel_matches_encode_panel_with_zones_and_states(self):
        timestamps, values, offsets = panel_inputs(40, 30, seed=2)
        zones = ["America/New_York", "Asia/Kolkata", "Europe/Paris"]
        zone_index = np.arange(40, dtype=np.int32) % 3
        cut = np.arange(0, 40 * 15 + 1, 15, dtype=np.int64)
        halves = []
        for part in (0, 1):
            rows = np.concatenate([np.arange(s * 30 + part * 15,
                                             s * 30 + part * 15 + 15)
                                   for s in range(40)])
            halves.append((timestamps[rows], values[rows]))
        with self.client.shared_memory() as shm:
            for dtype in ("float32", "float16", "float64"):
                with self.subTest(output_dtype=dtype):
                    want = self.client.encode_panel(
                        timestamps, values, series_offsets=offsets,
                        time_zones=zones, time_zone_index=zone_index,
                        profile="panel", output_dtype=dtype)
                    got = shm.encode_panel(
                        timestamps, values, series_offsets=offsets,
                        time_zones=zones, time_zone_index=zone_index,
                        profile="panel", output_dtype=dtype,
                        return_states=True)
                    self.assert_same_bytes(got.features, want.features)
                    self.assertEqual(got.schema, want.schema)
                    self.assertEqual(
                        [s.SerializeToString() for s in got.states],
                        [s.SerializeToString() for s in want.states])
                    np.testing.assert_array_equal(got.series_offsets,
                                                  offsets)
            # The second half of every series, continued from the first
            # half's states, in both paths.
            head_want = self.client.encode_panel(
                *halves[0], series_offsets=cut, profile="panel",
                time_zones=zones, time_zone_index=zone_index)
            head_got = shm.encode_panel(
                *halves[0], series_offsets=cut, profile="panel",
                time_zones=zones, time_zone_index=zone_index,
                return_states=True)
            tail_want = self.client.encode_panel(
                *halves[1], series_offsets=cut, profile="panel",
                time_zones=zones, time_zone_index=zone_index,
                states=head_want.states)
            tail_got = shm.encode_panel(
                *halves[1], series_offsets=cut, profile="panel",
                time_zones=zones, time_zone_index=zone_index,
                states=head_got.states, copy=True)
            self.assert_same_bytes(tail_got.features, tail_want.features)
            # Without return_states no states travel.
            self.assertEqual(shm.encode_panel(
                timestamps, values, series_offsets=offsets,
                profile="panel").states, [])

    def test_frame_matches_encode_frame(self):
        import pandas as pd
        timestamps, values, offsets = panel_inputs(12, 20, seed=3)
        series = np.repeat([f"s{i}" for i in range(12)], 20)
        frame = pd.DataFrame({"id": series,
                              "time": pd.to_datetime(timestamps, utc=True),
                              "a": values[:, 0], "b": values[:, 1],
                              "c": values[:, 2]})
        shuffled = frame.sample(frac=1.0, random_state=4)
        with self.client.shared_memory() as shm:
            want = self.client.encode_frame(shuffled, series_column="id",
                                            time_column="time",
                                            profile="panel")
            got = shm.encode_frame(shuffled, series_column="id",
                                   time_column="time", profile="panel",
                                   return_states=True)
            self.assertEqual(list(got.frame.columns), list(want.frame.columns))
            self.assertTrue(got.frame.index.equals(want.frame.index))
            self.assert_same_bytes(got.frame.to_numpy(),
                                   want.frame.to_numpy())
            self.assertEqual(
                {k: v.SerializeToString() for k, v in got.states.items()},
                {k: v.SerializeToString() for k, v in want.states.items()})

    # -- the region -------------------------------------------------------------

    def test_region_is_reused_then_grown(self):
        small = np.ones((16, 2, 32), dtype=np.float32)
        large = np.ones((16384, 4, 32), dtype=np.float32)  # 8 MiB
        with self.client.shared_memory() as shm:
            self.assertIsNone(shm.region_key)
            shm.apply_rope(small, profile="rope")
            key, size = shm.region_key, shm.region_bytes
            self.assertTrue(key.startswith(f"/phasor_{os.getpid()}_"))
            self.assertEqual(own_objects(), ["/dev/shm" + key])
            self.assertEqual(os.stat("/dev/shm" + key).st_mode & 0o777,
                             0o600)
            shm.apply_rope(small[:8], profile="rope")
            self.assertEqual((shm.region_key, shm.region_bytes), (key, size))
            shm.apply_rope(large, profile="rope")
            self.assertNotEqual(shm.region_key, key)
            self.assertGreaterEqual(shm.region_bytes, 2 * large.nbytes)
            self.assertEqual(own_objects(), ["/dev/shm" + shm.region_key])
            status = shm.status()
            self.assertEqual(list(status), [shm.region_key[1:]])
            self.assertEqual(status[shm.region_key[1:]],
                             (shm.region_key, 0, shm.region_bytes))

    def test_results_are_views_unless_copied(self):
        rng = np.random.default_rng(5)
        first = rng.standard_normal((32, 2, 32)).astype(np.float32)
        second = rng.standard_normal((32, 2, 32)).astype(np.float32)
        with self.client.shared_memory() as shm:
            view = shm.apply_rope(first, profile="rope").query
            owned = shm.apply_rope(first, profile="rope", copy=True).query
            self.assertFalse(view.flags.writeable)
            self.assertTrue(owned.flags.writeable)
            before = view.copy()
            self.assert_same_bytes(owned, before)
            shm.apply_rope(second, profile="rope")
            # The next call wrote over the view's bytes; the copy kept its.
            self.assertNotEqual(view.tobytes(), before.tobytes())
            self.assert_same_bytes(owned, before)
        # After close the view still reads (its mapping lives with it).
        self.assertEqual(view.shape, (32, 2, 32))
        float(view.sum())
        with self.client.shared_memory(copy=True) as shm:
            self.assertTrue(shm.apply_rope(first, profile="rope")
                            .query.flags.writeable)

    def test_closing_the_client_closes_its_sessions(self):
        with self.server.client(deadline_seconds=TIMEOUT_S) as other:
            shm = other.shared_memory()
            shm.apply_rope(np.ones((4, 1, 32), dtype=np.float32),
                           profile="rope")
            self.assertEqual(len(own_objects()), 1)
            with self.client.shared_memory() as probe:
                self.assertEqual(len(probe.status()), 1)
        self.assertEqual(own_objects(), [])

    def test_arrays_are_read_in_place(self):
        rng = np.random.default_rng(7)
        values = rng.standard_normal((1024, 8, 128)).astype(np.float32)
        with self.client.shared_memory() as shm:
            query = shm.array("query", values.shape, np.float32)
            query[...] = values
            got = shm.apply_rope(query, profile="rope", tensor_layout="thd")
            self.assert_same_bytes(got.query, self.client.apply_rope(
                values, profile="rope", tensor_layout="thd").query)
            # The call's own region holds the output only: the query was
            # read from its array's region, not copied beside it.
            self.assertLess(shm.region_bytes, 2 * values.nbytes)
            self.assertEqual(len(shm.status()), 2)
            # The server reads what the array holds at the call.
            query *= 0.5
            got = shm.apply_rope(query, profile="rope", tensor_layout="thd")
            self.assert_same_bytes(got.query, self.client.apply_rope(
                values * 0.5, profile="rope", tensor_layout="thd").query)
            # The same name, larger: a new region; the old array keeps its
            # bytes but is no longer shared, so a call copies it.
            before = dict(shm.status())
            bigger = shm.array("query", (2048, 8, 128), np.float32)
            self.assertNotEqual(set(shm.status()), set(before))
            self.assertEqual(bigger.shape, (2048, 8, 128))
            got = shm.apply_rope(query, profile="rope", tensor_layout="thd")
            self.assert_same_bytes(got.query, self.client.apply_rope(
                values * 0.5, profile="rope", tensor_layout="thd").query)
        self.assertEqual(own_objects(), [])
        self.assertEqual(self.client.shared_memory().status(), {})

    # -- errors -----------------------------------------------------------------

    def test_server_errors_name_the_field_and_keep_the_region(self):
        with self.client.shared_memory() as shm:
            with self.assertRaises(PhasorError) as caught:
                shm.apply_rope(np.ones((4, 1, 32), dtype=np.float32),
                               profile="no-such-model")
            self.assertEqual(caught.exception.code(),
                             grpc.StatusCode.NOT_FOUND)
            self.assertIn("model_name", caught.exception.details())
            with self.assertRaises(PhasorError) as caught:
                shm.apply_rope(np.ones((4, 1, 30), dtype=np.float32),
                               profile="rope")
            self.assertEqual(caught.exception.code(),
                             grpc.StatusCode.INVALID_ARGUMENT)
            # The profile's rotary_dim does not fit the query's head_dim.
            self.assertIn("rotary_dim", caught.exception.details())
            self.assertIn("head_dim 30", caught.exception.details())
            # The session still works after a refused call.
            shm.apply_rope(np.ones((4, 1, 32), dtype=np.float32),
                           profile="rope")
        with self.client.shared_memory() as shm:
            with self.assertRaises(PhasorError) as caught:
                shm.encode_panel(np.arange(3) * NS + START_NS,
                                 series_offsets=[0, 3], profile="panel",
                                 spec="temporal { time {} }")
            self.assertIn("spec", caught.exception.details())

    def test_key_outside_the_server_prefix_is_refused(self):
        with self.client.shared_memory(key_prefix="/other") as shm:
            with self.assertRaises(PhasorError) as caught:
                shm.apply_rope(np.ones((4, 1, 32), dtype=np.float32),
                               profile="rope")
            self.assertIn("/other_", caught.exception.details())
            self.assertIn("--shared_memory_key_prefix",
                          caught.exception.details())
        self.assertEqual(glob.glob(f"/dev/shm/other_{os.getpid()}_*"), [])

    def test_server_without_shared_memory_says_so(self):
        with harness.Server() as plain:
            with plain.client(deadline_seconds=TIMEOUT_S) as client:
                with client.shared_memory() as shm:
                    with self.assertRaises(PhasorError) as caught:
                        shm.apply_rope(np.ones((4, 1, 32), dtype=np.float32),
                                       profile="rope")
        self.assertEqual(caught.exception.code(),
                         grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("--system_shared_memory=true",
                      caught.exception.details())
        self.assertEqual(own_objects(), [])


if __name__ == "__main__":
    unittest.main()
