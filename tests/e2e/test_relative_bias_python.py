"""EncoderClient.relative_bias against a real phasor-server: T5 bucket ids
and the bias HF T5's compute_bias builds (the embedding of the buckets,
permuted to [H, q, k]), Shaw clipping, a profile table, time buckets over
datetime64 timestamps, and a field error.

The reference is T5's _relative_position_bucket (HF modeling_t5.py, Mesh
TensorFlow transformer_layers.py) written here in numpy with the same
float32 steps.
"""

import math
import os
import tempfile
import unittest

import numpy as np

import harness
from phasor_client import PhasorError, field_violations


def t5_buckets(relative, num_buckets, max_distance, bidirectional):
    """T5's bucket of each relative position (key − query), int64 array."""
    relative = np.asarray(relative, dtype=np.int64)
    ret = np.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        ret += (relative > 0).astype(np.int64) * num_buckets
        n = np.abs(relative)
    else:
        n = -np.minimum(relative, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = (np.log(n.astype(np.float32) / np.float32(max_exact))
                 / np.float32(math.log(max_distance / max_exact))
                 * np.float32(num_buckets - max_exact))
    large = np.where(n < max_exact, 0, large)  # the branch not taken
    large = np.minimum(max_exact + large.astype(np.int64), num_buckets - 1)
    return ret + np.where(n < max_exact, n, large)


PROFILES = """
profile {
  name: "t5-rel"
  spec { relative_bias { t5 { num_buckets: 32 max_distance: 128 direction: CAUSAL }
                         table: "rel" } }
  learned_tables { name: "rel" file { path: "rel.npy" } }
}
"""


class RelativeBiasPythonTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(16)
        cls.table = rng.standard_normal((32, 4)).astype(np.float32)
        np.save(os.path.join(cls.tmp.name, "rel.npy"), cls.table)
        profiles = os.path.join(cls.tmp.name, "profiles.textproto")
        with open(profiles, "w", encoding="utf-8") as f:
            f.write(PROFILES)
        cls.server = harness.Server(["--profiles", profiles]).start()
        cls.client = cls.server.client(deadline_seconds=30)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def test_t5_ids_and_bias_match_hf_compute_bias(self):
        for bidirectional in (True, False):
            result = self.client.relative_bias(
                q_len=40, k_len=300, q_start=260, table=self.table,
                bidirectional=bidirectional, include_bucket_ids=True)
            relative = (np.arange(300)[None, :]
                        - (260 + np.arange(40))[:, None])
            want = t5_buckets(relative, 32, 128, bidirectional)
            self.assertEqual(result.bucket_ids.dtype, np.int32)
            np.testing.assert_array_equal(result.bucket_ids, want)
            # HF: values = embedding(buckets) [q, k, H] -> permute(2, 0, 1).
            np.testing.assert_array_equal(
                result.bias, self.table[want].transpose(2, 0, 1))
            self.assertEqual(result.num_buckets, 32)

    def test_explicit_positions_float64_and_profile(self):
        query = np.array([5, 1000, -3])
        key = np.array([0, 5, 6, 2**62, -(2**62)])
        result = self.client.relative_bias(query, key, profile="t5-rel",
                                           output_dtype="float64")
        self.assertIsNone(result.bucket_ids)
        self.assertEqual(result.bias.dtype, np.float64)
        want = t5_buckets(key[None, :] - query[:, None], 32, 128, False)
        np.testing.assert_array_equal(
            result.bias, self.table[want].transpose(2, 0, 1).astype(np.float64))

    def test_shaw_clips(self):
        result = self.client.relative_bias(q_len=6, k_len=9,
                                           max_relative_position=3)
        self.assertIsNone(result.bias)
        relative = np.arange(9)[None, :] - np.arange(6)[:, None]
        np.testing.assert_array_equal(result.bucket_ids,
                                      np.clip(relative, -3, 3) + 3)
        self.assertEqual(result.num_buckets, 7)

    def test_time_buckets_over_datetime64(self):
        times = np.array(["2026-01-01T00:00:00", "2026-01-01T00:00:01",
                          "2026-01-01T00:10:00", "2026-01-02T00:00:00"],
                         dtype="datetime64[ns]")
        spec = {"time_buckets": {"num_buckets": 16, "exact_seconds": 4,
                                 "max_seconds": 3600}}
        result = self.client.relative_bias(times, times, spec=spec)
        gaps = (times[None, :] - times[:, None]).astype(np.int64) * 1e-9
        # N' = 8, max_exact = 4: 1 s back is exact bucket floor(4·1/4) = 1;
        # 600 s is log-spaced: 4 + floor(ln(150)/ln(900)·4) = 6; a day caps
        # at 7; keys after the query add 8.
        self.assertEqual(result.bucket_ids[1, 0], 1)
        self.assertEqual(result.bucket_ids[2, 0], 4 + math.floor(
            math.log(600 / 4) / math.log(3600 / 4) * 4))
        self.assertEqual(result.bucket_ids[3, 0], 7)
        self.assertEqual(result.bucket_ids[0, 3], 15)
        self.assertTrue((result.bucket_ids[gaps > 0] >= 8).all())

    def test_bad_spec_names_the_field(self):
        with self.assertRaises(PhasorError) as caught:
            self.client.relative_bias(q_len=2, k_len=2, num_buckets=3)
        self.assertIn(("spec.relative_bias.t5.num_buckets",),
                      [(field,) for field, _ in field_violations(caught.exception)])


if __name__ == "__main__":
    unittest.main()
