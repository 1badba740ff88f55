"""output_dtype float64 through the Python client against a real
phasor-server: encode_observations, encode_observations_stream, encode_panel
and encode_frame take "float64" and np.float64 and return float64 features
computed in float64 (not float32 widened), float64 content travels as
float64, and panels are still split by the response's true size."""

import math
import unittest

import numpy as np
import pandas as pd

import harness
from phasor_client import PhasorError, pb
from phasor_client import _requests

SPEC = dict(time={"dim": 8},
            time2vec={"omega": [1e-6, 2 * math.pi / 86400, 2 * math.pi],
                      "phi": [0.5, 0.25, -1.0]},
            gaps={"transform": "sinusoidal", "sinusoidal_dim": 4,
                  "sinusoidal_min_period_seconds": 60,
                  "sinusoidal_max_period_seconds": 86400,
                  "include_mask": True},
            calendar={"fields": ["hour_of_day", "day_of_year",
                                 "week_of_year"],
                      "fractional": True,
                      "time_zone": "America/New_York"})


def series(rng, rows, start_ns=1772900000 * 10**9):
    gaps = rng.integers(0, 7200 * 10**9, size=rows)
    times = start_ns + np.cumsum(gaps)
    values = rng.standard_normal((rows, 2))
    values[rng.random((rows, 2)) < 0.3] = np.nan
    return times.astype(np.int64), values


class ObservationsFloat64Test(harness.ServerTestCase):

    CLIENT_DEADLINE_SECONDS = 30

    def test_float64_by_name_and_numpy_dtype(self):
        times, values = series(np.random.default_rng(1), 300)
        f32 = self.client.encode_observations(times, values, spec=SPEC)
        for dtype in ("float64", np.float64, np.dtype("float64"),
                      pb.FLOAT64):
            f64 = self.client.encode_observations(times, values, spec=SPEC,
                                                  output_dtype=dtype)
            self.assertEqual(f64.features.dtype, np.float64)
            self.assertEqual(f64.features.shape, f32.features.shape)
            # Narrowed: the float32 output, to a float32 ulp (or 7e-16
            # near zero; core/compose.h).
            narrowed = f64.features.astype(np.float32)
            ulp = np.spacing(np.abs(f32.features))
            self.assertTrue(np.all(
                (np.abs(narrowed - f32.features) <= ulp)
                | (np.abs(narrowed.astype(np.float64) - f32.features)
                   <= 7e-16)))
            # Not float32 widened: most values carry more bits.
            widened = f32.features.astype(np.float64)
            self.assertGreater(np.mean(f64.features != widened), 0.5)
            self.assertEqual(f64.state.SerializeToString(),
                             f32.state.SerializeToString())

    def test_known_angles_to_the_last_bit(self):
        # Period 60 s from the epoch: 10 s is π/3, 15 s a quarter turn.
        times = np.array([10, 15, 45], dtype=np.int64) * 10**9
        out = self.client.encode_observations(
            times, time={"dim": 2, "min_period_seconds": 60,
                         "max_period_seconds": 60, "origin": "unix_epoch"},
            output_dtype="float64").features
        self.assertLessEqual(abs(out[0, 0] - math.sqrt(3) / 2), 1.7e-16)
        self.assertLessEqual(abs(out[0, 1] - 0.5), 1.7e-16)
        # Quarter turns: sin rounds to ±1, cos within the phase's 2^-64-turn
        # resolution (3.4e-19 rad) of 0.
        self.assertEqual(out[1, 0], 1.0)
        self.assertEqual(out[2, 0], -1.0)
        self.assertLessEqual(abs(out[1, 1]), 3.5e-19)
        self.assertLessEqual(abs(out[2, 1]), 3.5e-19)

    def test_float64_content_travels_as_float64(self):
        times = np.array([0, 1, 2], dtype=np.int64)
        content = np.array([[0.1, 1.0 + 2**-52], [-7.25, 1e-300],
                            [3.0000000000000004, 1e300]])
        out = self.client.encode_observations(
            times, content=content, content_block={"scale": 1 / 3},
            output_dtype="float64").features
        np.testing.assert_array_equal(out, content * (1 / 3))
        # A float32 output keeps sending float32 content, as before: 1e300
        # becomes inf there and is refused, a finite row is narrowed first.
        with self.assertRaises(PhasorError) as refused:
            self.client.encode_observations(
                times, content=content, content_block={"scale": 1 / 3})
        self.assertIn("observations.content[5]", str(refused.exception))
        finite = content.copy()
        finite[2, 1] = 1e30
        out32 = self.client.encode_observations(
            times, content=finite, content_block={"scale": 1 / 3}).features
        np.testing.assert_array_equal(
            out32, (finite.astype(np.float32).astype(np.float64)
                    * (1 / 3)).astype(np.float32))

    def test_stream_chunks_equal_the_whole_series(self):
        times, values = series(np.random.default_rng(2), 200)
        whole = self.client.encode_observations(
            times, values, spec=SPEC, output_dtype="float64").features
        bounds = [0, 1, 60, 61, 200]
        chunks = [(times[a:b], values[a:b]) for a, b in zip(bounds, bounds[1:])]
        parts = [f.features for f in self.client.encode_observations_stream(
            chunks, spec=SPEC, output_dtype=np.float64)]
        for part in parts:
            self.assertEqual(part.dtype, np.float64)
        self.assertEqual(np.concatenate(parts).tobytes(), whole.tobytes())

    def test_panel_equals_single_series_and_splits_by_true_size(self):
        rng = np.random.default_rng(3)
        lengths = [0, 50, 400, 1, 230]
        parts = [series(rng, n, 1772900000 * 10**9 + s * 86400 * 10**9)
                 for s, n in enumerate(lengths)]
        times = np.concatenate([p[0] for p in parts])
        values = np.concatenate([p[1] for p in parts])
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        panel = self.client.encode_panel(times, values, series_offsets=offsets,
                                         spec=SPEC, output_dtype="float64")
        self.assertEqual(panel.features.dtype, np.float64)
        for s, (t, v) in enumerate(parts):
            if len(t) == 0:
                continue
            alone = self.client.encode_observations(
                t, v, spec=SPEC, output_dtype="float64").features
            self.assertEqual(
                panel.features[offsets[s]:offsets[s + 1]].tobytes(),
                alone.tobytes(), f"series {s}")
        # A message limit that fits the float32 reply of the whole panel
        # but not the float64 one: the client must split by 8 bytes a value.
        width = panel.features.shape[1]
        limit = int(len(times) * width * 4 * 1.5) + 16384
        self.assertGreater(len(times) * width * 8, limit)
        small = self.server.client(deadline_seconds=30,
                                   max_message_bytes=limit)
        try:
            split = small.encode_panel(times, values, series_offsets=offsets,
                                       spec=SPEC, output_dtype=np.float64)
        finally:
            small.close()
        self.assertEqual(split.features.tobytes(), panel.features.tobytes())
        # The split budget counts 8 bytes a float64 value (its 0.5 margin
        # would hide a 4-byte estimate in this test alone).
        self.assertEqual(_requests.OUTPUT_ITEMSIZE[pb.FLOAT64], 8)

    def test_encode_frame_float64(self):
        rng = np.random.default_rng(4)
        rows = []
        for key in ("a", "b", "c"):
            t, v = series(rng, 30)
            rows.append(pd.DataFrame({
                "unique_id": key,
                "ds": pd.to_datetime(t, unit="ns", utc=True),
                "y": v[:, 0]}))
        frame = pd.concat(rows, ignore_index=True)
        f64 = self.client.encode_frame(frame, spec=SPEC,
                                       output_dtype="float64")
        f32 = self.client.encode_frame(frame, spec=SPEC)
        features64 = f64.frame
        features32 = f32.frame
        self.assertTrue(all(dtype == np.float64
                            for dtype in features64.dtypes))
        np.testing.assert_allclose(features64.to_numpy(),
                                   features32.to_numpy(dtype=np.float64),
                                   rtol=2**-23, atol=7e-16)
        self.assertGreater(
            np.mean(features64.to_numpy()
                    != features32.to_numpy(dtype=np.float64)), 0.5)


if __name__ == "__main__":
    unittest.main()
