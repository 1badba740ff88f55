"""EncoderClient.apply_rope / rope_tables with LLM shapes and dtypes against a
real phasor-server: [B, H, T, D] (HF) and [B, T, H, D] with per-row
position_ids, grouped-query keys, torch bfloat16 / float16 / float32, numpy
float16 and bfloat16 bits, float64 in double, and the client's errors.

The reference is HF transformers' apply_rotary_pos_emb (modeling_llama.py:
q·cos + rotate_half(q)·sin with cos/sin of cat(freqs, freqs) unsqueezed at
the head axis), written here in float64 numpy.
"""

import os
import tempfile
import unittest

import grpc
import numpy as np

import harness
import reference
from phasor_client import InvalidInputError, PhasorError, _panel

try:
    import torch
except ImportError:  # deploy/install-deps.sh --test installs python3-torch.
    torch = None

# float32 rounding of values of size ~4 (|q| from a normal draw), with the
# server's double-precision angles: a few float32 ulps.
FLOAT32_ATOL = 2e-6 * 4
# Dynamic NTK scaling depends on the sequence length, 1 + the largest
# position by default: a batch cut into several calls must still use the
# whole batch's.
PROFILES = """
profile {
  name: "dynamic64"
  spec { rope { rotary_dim: 64 max_position_embeddings: 64
                scaling { dynamic { factor: 2 } } } }
}
"""
NEEDS_TORCH = unittest.skipIf(torch is None, "python3-torch is not installed")


def rotate_half(x):
    """HF modeling_llama.rotate_half: (x1, x2) -> (-x2, x1)."""
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def hf_rope(x, position_ids, rotary_dim, base=10000.0, head_axis=1):
    """HF apply_rotary_pos_emb on x [B, H, T, D] (head_axis=1) or
    [B, T, H, D] (head_axis=2), position_ids [B, T]; channels >= rotary_dim
    pass through (HF's partial rotary, e.g. Phi / GPT-NeoX)."""
    x = np.asarray(x, dtype=np.float64)
    freqs = (np.asarray(position_ids, dtype=np.float64)[..., None]
             * reference.rope_inv_freq(rotary_dim, base))      # [B, T, rd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)              # [B, T, rd]
    cos = np.expand_dims(np.cos(emb), head_axis)
    sin = np.expand_dims(np.sin(emb), head_axis)
    rotated, passed = x[..., :rotary_dim], x[..., rotary_dim:]
    return np.concatenate([rotated * cos + rotate_half(rotated) * sin, passed],
                          axis=-1)


def bfloat16_round(values):
    """float32 -> nearest-even bfloat16, widened back to float32."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


class RopePythonTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        profiles = os.path.join(cls.tmp.name, "profiles.textproto")
        with open(profiles, "w", encoding="utf-8") as f:
            f.write(PROFILES)
        cls.server = harness.Server(["--profiles", profiles]).start()
        cls.client = cls.server.client(deadline_seconds=30)
        rng = np.random.default_rng(10)
        # B = 2, H = 4 query heads, Hkv = 2 (GQA), T = 5, D = 16.
        cls.query = rng.standard_normal((2, 4, 5, 16)).astype(np.float32)
        cls.key = rng.standard_normal((2, 2, 5, 16)).astype(np.float32)
        # Row 0 from 0; row 1 left-padded and decoding far out.
        cls.position_ids = np.array([[0, 1, 2, 3, 4],
                                     [0, 0, 1000, 1001, 70000]])

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    # -- shapes and positions ---------------------------------------------

    def test_bhtd_with_position_ids_and_gqa_key(self):
        result = self.client.apply_rope(self.query, self.key,
                                        position_ids=self.position_ids,
                                        rotary_dim=16)
        self.assertIsInstance(result.query, np.ndarray)
        self.assertEqual(result.query.dtype, np.float32)
        self.assertEqual(result.query.shape, (2, 4, 5, 16))
        self.assertEqual(result.key.shape, (2, 2, 5, 16))
        np.testing.assert_allclose(
            result.query, hf_rope(self.query, self.position_ids, 16),
            rtol=0, atol=FLOAT32_ATOL)
        np.testing.assert_allclose(
            result.key, hf_rope(self.key, self.position_ids, 16),
            rtol=0, atol=FLOAT32_ATOL)
        self.assertEqual(result.attention_factor, 1.0)

    def test_bthd_equals_bhtd_transposed(self):
        query_bthd = np.ascontiguousarray(self.query.transpose(0, 2, 1, 3))
        key_bthd = np.ascontiguousarray(self.key.transpose(0, 2, 1, 3))
        result = self.client.apply_rope(query_bthd, key_bthd,
                                        self.position_ids, rotary_dim=16,
                                        layout="bthd")
        self.assertEqual(result.query.shape, (2, 5, 4, 16))
        np.testing.assert_allclose(
            result.query,
            hf_rope(query_bthd, self.position_ids, 16, head_axis=2),
            rtol=0, atol=FLOAT32_ATOL)
        bhtd = self.client.apply_rope(self.query, self.key,
                                      self.position_ids, rotary_dim=16)
        # The same tokens on the wire: bytewise the same numbers.
        np.testing.assert_array_equal(result.query,
                                      bhtd.query.transpose(0, 2, 1, 3))
        np.testing.assert_array_equal(result.key,
                                      bhtd.key.transpose(0, 2, 1, 3))
        # tensor_layout= with a pairing in layout= reads the same.
        again = self.client.apply_rope(query_bthd, key_bthd,
                                       self.position_ids, rotary_dim=16,
                                       layout="half", tensor_layout="bthd")
        np.testing.assert_array_equal(again.query, result.query)

    def test_shared_and_default_positions(self):
        shared = np.arange(3, 8)
        expected = hf_rope(self.query, np.tile(shared, (2, 1)), 16)
        for positions in (shared, shared[None, :], np.tile(shared, (2, 1))):
            result = self.client.apply_rope(self.query, positions=positions,
                                            rotary_dim=16)
            np.testing.assert_allclose(result.query, expected, rtol=0,
                                       atol=FLOAT32_ATOL)
        default = self.client.apply_rope(self.query, rotary_dim=16)
        np.testing.assert_allclose(
            default.query, hf_rope(self.query, np.tile(np.arange(5), (2, 1)),
                                   16), rtol=0, atol=FLOAT32_ATOL)
        self.assertIsNone(default.key)

    def test_unbatched_and_non_contiguous_inputs(self):
        # [T, H, D] as before, and an [H, T, D] view of the batch's row 1.
        thd = self.client.apply_rope(
            self.query[1].transpose(1, 0, 2), positions=self.position_ids[1],
            rotary_dim=16)
        self.assertEqual(thd.query.shape, (5, 4, 16))
        htd = self.client.apply_rope(self.query[1], tensor_layout="htd",
                                     positions=self.position_ids[1],
                                     rotary_dim=16)
        self.assertEqual(htd.query.shape, (4, 5, 16))
        expected = hf_rope(self.query, self.position_ids, 16)[1]
        np.testing.assert_allclose(htd.query, expected, rtol=0,
                                   atol=FLOAT32_ATOL)
        np.testing.assert_array_equal(thd.query, htd.query.transpose(1, 0, 2))
        # A strided view (every other head) goes as it is.
        strided = self.query[:, ::2]
        result = self.client.apply_rope(strided, rotary_dim=16)
        full = self.client.apply_rope(self.query, rotary_dim=16)
        np.testing.assert_array_equal(result.query, full.query[:, ::2])

    def test_partial_rotary_and_continuous_positions(self):
        times = np.array([[0.0, 0.5, 1.25, 2.0, 10.5],
                          [3.0, 3.1, 3.2, 100.0, 1e6]])
        result = self.client.apply_rope(self.query, position_ids=times,
                                        rotary_dim=8)
        np.testing.assert_allclose(result.query, hf_rope(self.query, times, 8),
                                   rtol=0, atol=FLOAT32_ATOL)
        np.testing.assert_array_equal(result.query[..., 8:],
                                      self.query[..., 8:])

    def test_interleaved_pairing_with_a_tensor_layout(self):
        # GPT-J / Meta pairs (2i, 2i+1): rotate each pair by θ_i·position.
        query_bthd = self.query.transpose(0, 2, 1, 3)
        result = self.client.apply_rope(query_bthd, rotary_dim=16,
                                        position_ids=self.position_ids,
                                        layout="interleaved",
                                        tensor_layout="bthd")
        angles = (self.position_ids[..., None].astype(np.float64)
                  * reference.rope_inv_freq(16))[:, :, None, :]
        even = query_bthd[..., 0::2].astype(np.float64)
        odd = query_bthd[..., 1::2].astype(np.float64)
        expected = np.empty(query_bthd.shape)
        expected[..., 0::2] = even * np.cos(angles) - odd * np.sin(angles)
        expected[..., 1::2] = odd * np.cos(angles) + even * np.sin(angles)
        np.testing.assert_allclose(result.query, expected, rtol=0,
                                   atol=FLOAT32_ATOL)

    def test_matches_rope_tables_with_hf_formula(self):
        # A client with its own kernel: RopeTables for the flattened
        # position_ids, then HF's formula with them.
        tables = self.client.rope_tables(self.position_ids, rotary_dim=16)
        self.assertEqual(tables.cos.shape, (10, 8))
        cos = np.concatenate([tables.cos, tables.cos], -1).reshape(2, 1, 5, 16)
        sin = np.concatenate([tables.sin, tables.sin], -1).reshape(2, 1, 5, 16)
        mine = self.query * cos + rotate_half(self.query) * sin
        served = self.client.apply_rope(self.query, position_ids=self.position_ids,
                                        rotary_dim=16).query
        np.testing.assert_allclose(served, mine, rtol=0, atol=FLOAT32_ATOL)

    # -- dtypes ------------------------------------------------------------

    def test_numpy_float16(self):
        query16 = self.query.astype(np.float16)
        key16 = self.key.astype(np.float16)
        result = self.client.apply_rope(query16, key16,
                                        position_ids=self.position_ids,
                                        rotary_dim=16)
        self.assertEqual(result.query.dtype, np.float16)
        self.assertEqual(result.key.dtype, np.float16)
        # Rotation in float32 of the float16 inputs, rounded once.
        expected = hf_rope(query16, self.position_ids, 16)
        np.testing.assert_allclose(result.query.astype(np.float64), expected,
                                   rtol=2**-11, atol=2**-14)

    def test_numpy_bfloat16_bits(self):
        bits = (bfloat16_round(self.query).view(np.uint32) >> 16).astype(
            np.uint16)
        result = self.client.apply_rope(bits, position_ids=self.position_ids,
                                        rotary_dim=16, dtype="bfloat16")
        self.assertEqual(result.query.dtype, np.uint16)
        self.assertEqual(result.query.shape, bits.shape)
        widened = (result.query.astype(np.uint32) << 16).view(np.float32)
        fp32 = self.client.apply_rope(bfloat16_round(self.query),
                                      position_ids=self.position_ids,
                                      rotary_dim=16).query
        np.testing.assert_allclose(widened, bfloat16_round(fp32), rtol=2**-8,
                                   atol=0)
        with self.assertRaisesRegex(TypeError, 'dtype="bfloat16"'):
            self.client.apply_rope(bits, rotary_dim=16)

    def test_float64_rotates_in_double_or_rounds_on_purpose(self):
        query64 = self.query.astype(np.float64)
        key64 = self.key.astype(np.float64)
        wide = self.client.apply_rope(query64, key64, self.position_ids,
                                      rotary_dim=16)
        self.assertEqual(wide.query.dtype, np.float64)
        # Rotated in double on the server. The HF formula in float64 numpy
        # forms its own θ (pow, not correctly rounded) and the double angle
        # p·θ: it is the less exact of the two, by up to ~|p|·θ·2^-52
        # (core's tests hold the server to 4e-16 against __float128).
        np.testing.assert_allclose(wide.query,
                                   hf_rope(query64, self.position_ids, 16),
                                   rtol=0, atol=1e-11)
        np.testing.assert_allclose(wide.key,
                                   hf_rope(key64, self.position_ids, 16),
                                   rtol=0, atol=1e-11)
        rounded = self.client.apply_rope(query64, key64, self.position_ids,
                                         rotary_dim=16, dtype="float32")
        self.assertEqual(rounded.query.dtype, np.float64)
        fp32 = self.client.apply_rope(self.query, self.key, self.position_ids,
                                      rotary_dim=16)
        np.testing.assert_array_equal(rounded.query, fp32.query)
        np.testing.assert_array_equal(rounded.key, fp32.key)
        # float32 in, float64 on the wire: widened exactly, rotated in double.
        widened = self.client.apply_rope(self.query, rotary_dim=16,
                                         position_ids=self.position_ids,
                                         dtype="float64")
        self.assertEqual(widened.query.dtype, np.float32)
        np.testing.assert_allclose(widened.query,
                                   hf_rope(self.query, self.position_ids, 16),
                                   rtol=0, atol=1e-6)

    @NEEDS_TORCH
    def test_torch_bfloat16_in_torch_bfloat16_out(self):
        query = torch.from_numpy(self.query).to(torch.bfloat16)
        key = torch.from_numpy(self.key).to(torch.bfloat16)
        position_ids = torch.from_numpy(self.position_ids)
        result = self.client.apply_rope(query, key, position_ids=position_ids,
                                        rotary_dim=16)
        self.assertIsInstance(result.query, torch.Tensor)
        self.assertEqual(result.query.dtype, torch.bfloat16)
        self.assertEqual(result.key.dtype, torch.bfloat16)
        self.assertEqual(tuple(result.query.shape), (2, 4, 5, 16))
        self.assertTrue(result.query.is_contiguous())
        result.query.add_(0)  # Writable: not the reply's bytes.
        # The fp32 rotation of the same bf16 values, rounded to bf16.
        fp32 = self.client.apply_rope(query.float(), key.float(),
                                      position_ids=position_ids,
                                      rotary_dim=16)
        self.assertEqual(fp32.query.dtype, torch.float32)
        torch.testing.assert_close(result.query,
                                   fp32.query.to(torch.bfloat16),
                                   rtol=2**-8, atol=0)
        torch.testing.assert_close(result.key, fp32.key.to(torch.bfloat16),
                                   rtol=2**-8, atol=0)
        # The fp32 path agrees with numpy's on the same numbers.
        numpy_fp32 = self.client.apply_rope(query.float().numpy(),
                                            key.float().numpy(),
                                            position_ids=self.position_ids,
                                            rotary_dim=16)
        np.testing.assert_array_equal(fp32.query.numpy(), numpy_fp32.query)
        with self.assertRaisesRegex(TypeError, "travels as bfloat16"):
            self.client.apply_rope(query, rotary_dim=16, dtype="float32")

    @NEEDS_TORCH
    def test_torch_float16_and_grad(self):
        query = torch.from_numpy(self.query).half().transpose(1, 2)  # bthd
        result = self.client.apply_rope(query, layout="bthd",
                                        position_ids=self.position_ids,
                                        rotary_dim=16)
        self.assertEqual(result.query.dtype, torch.float16)
        self.assertEqual(tuple(result.query.shape), (2, 5, 4, 16))
        np.testing.assert_allclose(
            result.query.double().numpy(),
            hf_rope(query.numpy(), self.position_ids, 16, head_axis=2),
            rtol=2**-11, atol=2**-14)
        with_grad = torch.from_numpy(self.query).requires_grad_()
        out = self.client.apply_rope(with_grad, rotary_dim=16).query
        self.assertFalse(out.requires_grad)
        wide = self.client.apply_rope(
            torch.ones(1, 1, 2, 4, dtype=torch.float64), rotary_dim=4).query
        self.assertEqual(wide.dtype, torch.float64)
        self.assertEqual(float(wide[0, 0, 0, 0]), 1.0)  # Position 0: identity.

    # -- tensors over the message limit -----------------------------------

    def test_batch_over_the_message_limit_is_cut_and_joined(self):
        rng = np.random.default_rng(11)
        query = rng.standard_normal((2, 8, 300, 64)).astype(np.float32)
        key = rng.standard_normal((2, 2, 300, 64)).astype(np.float32)
        # Row 1's positions are the larger: pieces of row 0 alone would
        # default to a smaller seq_len, and so other dynamic frequencies.
        position_ids = np.stack([np.arange(300), np.arange(300) + 500])
        small = self.server.client(deadline_seconds=30,
                                   max_message_bytes=256 << 10)
        self.addCleanup(small.close)
        cases = [dict(rotary_dim=64),
                 dict(rotary_dim=64, max_position_embeddings=64,
                      scaling={"dynamic": {"factor": 2.0}}),
                 dict(profile="dynamic64")]
        for config in cases:
            for layout in ("bhtd", "bthd"):
                with self.subTest(config=config, layout=layout):
                    q, k = query, key
                    if layout == "bthd":
                        q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
                    whole = self.client.apply_rope(
                        q, k, position_ids=position_ids,
                        tensor_layout=layout, **config)
                    cut = small.apply_rope(q, k, position_ids=position_ids,
                                           tensor_layout=layout, **config)
                    np.testing.assert_array_equal(cut.query, whole.query)
                    np.testing.assert_array_equal(cut.key, whole.key)
                    self.assertEqual(cut.attention_factor,
                                     whole.attention_factor)
        # The dynamic case did scale: not plain RoPE.
        plain = self.client.apply_rope(query, position_ids=position_ids,
                                       rotary_dim=64).query
        dynamic = small.apply_rope(query, position_ids=position_ids,
                                   profile="dynamic64").query
        self.assertGreater(np.abs(plain - dynamic).max(), 1e-3)
        np.testing.assert_allclose(
            small.apply_rope(query, position_ids=position_ids,
                             rotary_dim=64).query,
            hf_rope(query, position_ids, 64), rtol=0, atol=FLOAT32_ATOL)

    def test_batch_over_piece_bytes_is_cut_under_the_default_limit(self):
        """A batch far below 64 MiB but over PIECE_BYTES goes in calls of
        at most PIECE_BYTES (gRPC Python's large replies are slow), with the
        bytes of one call."""
        rng = np.random.default_rng(14)
        query = rng.standard_normal((2, 8, 1200, 64)).astype(np.float32)
        key = rng.standard_normal((2, 2, 1200, 64)).astype(np.float32)
        self.assertGreater(query.nbytes, 2 * _panel.PIECE_BYTES)
        sizes = []
        method = self.client._stub.ApplyRope

        class Counting:
            def future(self, request, **kwargs):
                sizes.append(request.ByteSize())
                return method.future(request, **kwargs)

            def __call__(self, request, **kwargs):
                sizes.append(request.ByteSize())
                return method(request, **kwargs)

        self.client._stub.ApplyRope = Counting()
        saved = _panel.PIECE_BYTES
        try:
            cut = self.client.apply_rope(query, key, rotary_dim=64)
            cut_sizes, sizes[:] = list(sizes), []
            _panel.PIECE_BYTES = 1 << 62
            whole = self.client.apply_rope(query, key, rotary_dim=64)
        finally:
            _panel.PIECE_BYTES = saved
            self.client._stub.ApplyRope = method
        self.assertEqual(len(sizes), 1)
        self.assertGreaterEqual(
            len(cut_sizes), -(-(query.nbytes + key.nbytes) // saved))
        self.assertLessEqual(max(cut_sizes), saved)
        np.testing.assert_array_equal(cut.query, whole.query)
        np.testing.assert_array_equal(cut.key, whole.key)

    @NEEDS_TORCH
    def test_torch_bfloat16_over_the_message_limit(self):
        rng = np.random.default_rng(12)
        query = torch.from_numpy(rng.standard_normal(
            (3, 4, 200, 64)).astype(np.float32)).to(torch.bfloat16)
        small = self.server.client(deadline_seconds=30,
                                   max_message_bytes=64 << 10)
        self.addCleanup(small.close)
        cut = small.apply_rope(query, rotary_dim=64).query
        whole = self.client.apply_rope(query, rotary_dim=64).query
        self.assertEqual(cut.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(cut, whole))

    # -- errors --------------------------------------------------------------

    def test_client_errors_say_what_to_send(self):
        cases = [
            (ValueError, "B must match",
             dict(query=self.query, key=self.key[:1])),
            (ValueError, "T must match",
             dict(query=self.query, key=self.key[:, :, :4])),
            (ValueError, r"positions: have shape \(3, 5\)",
             dict(query=self.query, positions=np.zeros((3, 5), np.int64))),
            (ValueError, r"expected \[B, H, T, D\]",
             dict(query=self.query[0, 0])),
            (ValueError, "layout \"bthd\" names 4",
             dict(query=self.query[0], layout="bthd")),
            (ValueError, "tensor layout",
             dict(query=self.query, layout="hbtd")),
            (ValueError, "not both",
             dict(query=self.query, positions=np.arange(5),
                  position_ids=self.position_ids)),
            (TypeError, "int64",
             dict(query=np.zeros((1, 1, 2, 4), np.int64))),
            (TypeError, "send both alike",
             dict(query=self.query, key=self.key.astype(np.float16))),
            (TypeError, "positions: have dtype bool",
             dict(query=self.query, positions=np.ones(5, bool))),
        ]
        for error, message, arguments in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(error, message) as raised:
                    self.client.apply_rope(rotary_dim=4, **arguments)
                # One exception type for every failure, naming the argument.
                self.assertIsInstance(raised.exception, InvalidInputError)
                self.assertEqual(raised.exception.code(),
                                 grpc.StatusCode.INVALID_ARGUMENT)
                field, _ = raised.exception.field_violations()[0]
                self.assertTrue(raised.exception.details().startswith(field))

    def test_server_errors_name_the_field(self):
        with self.assertRaises(grpc.RpcError) as raised:
            self.client.apply_rope(self.query, rotary_dim=7)
        self.assertEqual(raised.exception.code(),
                         grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("rotary_dim", raised.exception.details())
        self.assertIsInstance(raised.exception, PhasorError)
        # The same from a batch cut into several calls.
        small = self.server.client(deadline_seconds=30,
                                   max_message_bytes=4 << 10)
        self.addCleanup(small.close)
        with self.assertRaises(PhasorError) as raised:
            small.apply_rope(np.zeros((2, 4, 64, 16), np.float32),
                             rotary_dim=7)
        self.assertEqual(raised.exception.code(),
                         grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("rotary_dim", raised.exception.details())


if __name__ == "__main__":
    unittest.main(verbosity=2)
