"""The Python example package (client/python) against a real phasor-server:
numpy arrays in, numpy arrays out, values checked against reference.py."""

import os
import subprocess
import sys
import unittest

import grpc
import numpy as np

import harness
import reference
from phasor_client import field_violations, pb

FLOAT32_TOLERANCE = 2e-6


class PythonClientTest(harness.ServerTestCase):

    CLIENT_DEADLINE_SECONDS = 30

    def test_encode_positions_returns_numpy(self):
        pe = self.client.encode_positions(start=1, count=64, dim=32)
        self.assertIsInstance(pe, np.ndarray)
        self.assertEqual(pe.dtype, np.float32)
        self.assertEqual(pe.shape, (64, 32))
        np.testing.assert_allclose(pe,
                                   reference.sinusoid(np.arange(1, 65), 32),
                                   rtol=0, atol=FLOAT32_TOLERANCE)
        # Published d = 32 figures for positions 1..64: PE(1, 1:6), PE(64, 1:6).
        np.testing.assert_allclose(
            pe[0, :6], [0.841471, 0.540302, 0.533168, 0.846009, 0.310984,
                        0.950415], atol=1e-6)
        np.testing.assert_allclose(
            pe[63, :6], [0.920026, 0.391857, -0.990428, -0.138029, 0.983524,
                         0.180776], atol=1e-6)

    def test_explicit_positions_keep_precision(self):
        positions = np.array([2**24 + 1, 2**31 - 1, 7], dtype=np.int64)
        pe = self.client.encode_positions(positions, dim=16)
        np.testing.assert_allclose(pe, reference.sinusoid(positions, 16),
                                   rtol=0, atol=FLOAT32_TOLERANCE)
        real = np.array([0.5, 1.25, 1000.75])
        pe = self.client.encode_positions(real, dim=16)
        np.testing.assert_allclose(pe, reference.sinusoid(real, 16), rtol=0,
                                   atol=FLOAT32_TOLERANCE)

    def test_half_precision_outputs(self):
        expected = reference.sinusoid(np.arange(10), 8)
        fp16 = self.client.encode_positions(count=10, dim=8,
                                            output_dtype="float16")
        self.assertEqual(fp16.dtype, np.float16)
        np.testing.assert_allclose(fp16.astype(np.float64), expected,
                                   atol=2**-11)
        bf16 = self.client.encode_positions(count=10, dim=8,
                                            output_dtype="bfloat16")
        self.assertEqual(bf16.dtype, np.float32)  # Widened on receipt.
        np.testing.assert_allclose(bf16, expected, atol=2**-8)

    def test_content_scale(self):
        content = np.ones((5, 4), dtype=np.float32)
        out = self.client.encode_positions(count=5, dim=4, content=content,
                                           content_scale=2.0)
        np.testing.assert_allclose(
            out, 2.0 + reference.sinusoid(np.arange(5), 4), atol=1e-6)

    def test_apply_rope(self):
        rng = np.random.default_rng(2)
        query = rng.standard_normal((7, 3, 16)).astype(np.float32)
        key = rng.standard_normal((7, 1, 16)).astype(np.float32)
        result = self.client.apply_rope(query, key, rotary_dim=16)
        self.assertEqual(result.query.shape, query.shape)
        self.assertEqual(result.attention_factor, 1.0)
        positions = np.arange(7)
        np.testing.assert_allclose(result.query,
                                   reference.rope_half(query, positions, 16),
                                   atol=1e-5)
        np.testing.assert_allclose(result.key,
                                   reference.rope_half(key, positions, 16),
                                   atol=1e-5)
        # With the same content at every position, the score q_m·k_n
        # depends on m − n only (RoPE's defining property): constant diagonals.
        same_q = np.repeat(query[:1], 7, axis=0)
        same_k = np.repeat(key[:1], 7, axis=0)
        rotated = self.client.apply_rope(same_q, same_k, rotary_dim=16)
        scores = np.einsum("td,sd->ts", rotated.query[:, 0], rotated.key[:, 0])
        for offset in range(-6, 7):
            band = np.diagonal(scores, offset)
            np.testing.assert_allclose(band, band[0], atol=1e-4)

    def test_apply_rope_bfloat16_and_yarn(self):
        query = np.linspace(-1, 1, 4 * 2 * 8, dtype=np.float32).reshape(4, 2, 8)
        result = self.client.apply_rope(
            query, rotary_dim=8, dtype="bfloat16", max_position_embeddings=4096,
            scaling={"yarn": {"factor": 4.0,
                              "original_max_position_embeddings": 1024}})
        # YaRN attention factor 0.1·ln(f) + 1.
        self.assertAlmostEqual(result.attention_factor,
                               0.1 * np.log(4.0) + 1.0, places=6)
        self.assertEqual(result.query.shape, (4, 2, 8))
        # Position 0 is not rotated, only scaled by the folded factor.
        np.testing.assert_allclose(result.query[0],
                                   query[0] * result.attention_factor,
                                   rtol=2**-6, atol=1e-3)

    def test_rope_tables(self):
        tables = self.client.rope_tables(count=5, rotary_dim=8)
        angles = np.arange(5)[:, None] * reference.rope_inv_freq(8)
        np.testing.assert_allclose(tables.cos, np.cos(angles),
                                   atol=FLOAT32_TOLERANCE)
        np.testing.assert_allclose(tables.sin, np.sin(angles),
                                   atol=FLOAT32_TOLERANCE)
        np.testing.assert_allclose(tables.inv_freq, reference.rope_inv_freq(8),
                                   rtol=1e-12)

    def test_alibi(self):
        slopes, bias = self.client.alibi(8, 4, 6, causal=False)
        np.testing.assert_allclose(slopes, reference.alibi_slopes(8))
        np.testing.assert_allclose(bias, reference.alibi_bias(8, 4, 6, False),
                                   rtol=1e-6)

    def test_encode_observations_and_stream(self):
        start = np.datetime64("2024-03-10T06:00:00", "ns").astype(np.int64)
        timestamps = start + np.array([0, 60, 61, 3600], dtype=np.int64) * 10**9
        values = np.array([[1.0], [np.nan], [3.0], [4.0]])
        spec = pb.EncoderSpec(temporal=pb.TemporalSpec(
            time=pb.TimeBlock(dim=4, min_period_seconds=60,
                              max_period_seconds=3600)))
        features, schema, state = self.client.encode_observations(
            timestamps, values, spec=spec)
        self.assertEqual(features.shape, (4, 4))
        self.assertEqual([entry.block for entry in schema], ["time"])
        tau = (timestamps - timestamps[0]) / 1e9
        np.testing.assert_allclose(features,
                                   reference.time_ladder(tau, 4, 60, 3600),
                                   atol=FLOAT32_TOLERANCE)
        self.assertEqual(state.last_timestamp_ns, int(timestamps[-1]))
        chunks = [(timestamps[:2], values[:2]), (timestamps[2:], values[2:])]
        streamed = list(self.client.encode_observations_stream(chunks,
                                                               spec=spec))
        self.assertEqual(len(streamed), 2)
        np.testing.assert_array_equal(
            np.concatenate([part.features for part in streamed]), features)

    def test_describe(self):
        response = self.client.describe(dim=16, num_offsets=50)
        omega = 10000.0 ** (-2.0 * np.arange(8) / 16)
        wavelengths, longest, distance, offset, similarity = \
            reference.describe(omega, 50)
        np.testing.assert_allclose(response.frequencies, omega, rtol=1e-12)
        np.testing.assert_allclose(response.wavelengths, wavelengths,
                                   rtol=1e-12)
        self.assertEqual(response.unit, "positions")
        self.assertAlmostEqual(response.unambiguous_range, longest, places=6)
        self.assertAlmostEqual(response.nearest_code_distance, distance,
                               places=9)
        self.assertEqual(response.nearest_code_offset, offset)
        np.testing.assert_allclose(response.similarity, similarity, atol=1e-9)

    def test_error_carries_field_violation(self):
        with self.assertRaises(grpc.RpcError) as raised:
            self.client.encode_positions(count=4, dim=7)
        error = raised.exception
        self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("dim", error.details())
        fields = [field for field, _ in field_violations(error)]
        self.assertTrue(any(field.endswith("dim") for field in fields), fields)

    def test_unknown_profile_is_not_found(self):
        with self.assertRaises(grpc.RpcError) as raised:
            self.client.encode_positions(count=4, profile="no-such-profile")
        self.assertEqual(raised.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_describe_seq_len_picks_dynamic_frequencies(self):
        spec = ('rope { rotary_dim: 8 max_position_embeddings: 4096 '
                'scaling { dynamic { factor: 2 } } }')
        default = self.client.describe(spec=spec)
        long = self.client.describe(spec=spec, seq_len=100000)
        self.assertEqual(default.seq_len, 4096)
        self.assertEqual(long.seq_len, 100000)
        tables = self.client.rope_tables(np.array([0, 99999]), spec=spec)
        np.testing.assert_array_equal(np.asarray(long.frequencies),
                                      np.asarray(tables.inv_freq, np.float64))
        self.assertFalse(np.array_equal(np.asarray(default.frequencies),
                                        np.asarray(long.frequencies)))

    def test_list_profiles_and_dtype_enum(self):
        import tempfile
        from phasor_client import dtype_enum
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "profiles.textproto")
            with open(path, "w") as f:
                f.write('profile { name: "sin16" description: "16-wide" '
                        'spec { positional { sinusoidal { dim: 16 } } } }\n'
                        'profile { name: "rope64" '
                        'spec { rope { rotary_dim: 64 base: 500000 } } }\n')
            with harness.Server(["--profiles", path]) as server:
                client = server.client()
                profiles = client.list_profiles()
                client.close()
        self.assertEqual(sorted(p.name for p in profiles), ["rope64", "sin16"])
        by_name = {p.name: p for p in profiles}
        self.assertEqual(by_name["sin16"].description, "16-wide")
        self.assertEqual(by_name["sin16"].spec.positional.sinusoidal.dim, 16)
        self.assertEqual(by_name["rope64"].spec.rope.base, 500000)
        self.assertEqual(dtype_enum("float16"), pb.FLOAT16)
        self.assertEqual(dtype_enum(np.float32), pb.FLOAT32)
        self.assertEqual(dtype_enum("bfloat16"), pb.BFLOAT16)
        with self.assertRaises((ValueError, TypeError)):
            dtype_enum("complex64")

    def test_example_script(self):
        script = os.path.join(harness.SOURCE_DIR, "client", "python",
                              "example.py")
        result = subprocess.run(
            [sys.executable, script, "--target", self.server.target],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": harness.PYTHON_DIR})
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("health: SERVING", result.stdout)
        self.assertIn("encode_positions: float32 (8, 16)", result.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
