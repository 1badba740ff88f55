"""EncoderClient.apply_rope / rope_tables with LLM shapes and dtypes against a
real phasor-server: [B, H, T, D] (HF) and [B, T, H, D] with per-row
position_ids, grouped-query keys, torch bfloat16 / float16 / float32, numpy
float16 and bfloat16 bits, float64 in double, and the client's errors; the
scaling= dict forms and rope_spec_from_hf on published models' configs.

The reference is HF transformers' apply_rotary_pos_emb (modeling_llama.py:
q·cos + rotate_half(q)·sin with cos/sin of cat(freqs, freqs) unsqueezed at
the head axis), written here in float64 numpy, with the inverse frequencies
and attention factor of modeling_rope_utils.py's _compute_*_parameters
(hf_llama3_inv_freq, hf_yarn_inv_freq, hf_longrope_inv_freq).
"""

import math
import os
import tempfile
import unittest

import grpc
import numpy as np

import harness
import phasor_client
import reference
from phasor_client import InvalidInputError, PhasorError, _panel, pb

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


def hf_rope(x, position_ids, rotary_dim, base=10000.0, head_axis=1,
            inv_freq=None, attention_factor=1.0):
    """HF apply_rotary_pos_emb on x [B, H, T, D] (head_axis=1) or
    [B, T, H, D] (head_axis=2), position_ids [B, T]; channels >= rotary_dim
    pass through (HF's partial rotary, e.g. Phi / GPT-NeoX). inv_freq
    (default: plain RoPE at `base`) and attention_factor, which multiplies
    cos and sin, come from a scaling's _compute_*_parameters."""
    x = np.asarray(x, dtype=np.float64)
    if inv_freq is None:
        inv_freq = reference.rope_inv_freq(rotary_dim, base)
    freqs = (np.asarray(position_ids, dtype=np.float64)[..., None]
             * inv_freq)                                       # [B, T, rd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)              # [B, T, rd]
    cos = np.expand_dims(np.cos(emb), head_axis) * attention_factor
    sin = np.expand_dims(np.sin(emb), head_axis) * attention_factor
    rotated, passed = x[..., :rotary_dim], x[..., rotary_dim:]
    return np.concatenate([rotated * cos + rotate_half(rotated) * sin, passed],
                          axis=-1)


def hf_llama3_inv_freq(dim, base, factor, low_freq_factor, high_freq_factor,
                       original_max_position_embeddings):
    """HF _compute_llama3_parameters: wavelengths shorter than
    L0/high_freq_factor kept, longer than L0/low_freq_factor divided by
    factor, blended in between; attention factor 1."""
    inv_freq = reference.rope_inv_freq(dim, base)
    wavelen = 2 * math.pi / inv_freq
    low_wavelen = original_max_position_embeddings / low_freq_factor
    high_wavelen = original_max_position_embeddings / high_freq_factor
    scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = ((original_max_position_embeddings / wavelen - low_freq_factor)
              / (high_freq_factor - low_freq_factor))
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled)


def hf_yarn_inv_freq(dim, base, factor, original_max_position_embeddings,
                     beta_fast=32.0, beta_slow=1.0):
    """(inv_freq, attention_factor) of HF _compute_yarn_parameters (truncated
    correction range, no mscale)."""
    def correction_dim(rotations):
        return (dim * math.log(original_max_position_embeddings
                               / (rotations * 2 * math.pi))
                / (2 * math.log(base)))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    pos_freqs = base ** (np.arange(0, dim, 2) / dim)
    inv_freq = (1 / (factor * pos_freqs) * (1 - extrapolation)
                + 1 / pos_freqs * extrapolation)
    return inv_freq, 0.1 * math.log(factor) + 1.0


def hf_longrope_inv_freq(dim, base, short_factor, long_factor,
                         original_max_position_embeddings,
                         max_position_embeddings, seq_len):
    """(inv_freq, attention_factor) of HF _compute_longrope_parameters for a
    config without `factor`: long factors when seq_len > L0."""
    factor = max_position_embeddings / original_max_position_embeddings
    attention_factor = (1.0 if factor <= 1 else math.sqrt(
        1 + math.log(factor) / math.log(original_max_position_embeddings)))
    ext = np.asarray(long_factor if seq_len > original_max_position_embeddings
                     else short_factor, dtype=np.float64)
    return 1 / (ext * base ** (np.arange(0, dim, 2) / dim)), attention_factor


# config.json fragments (the keys RoPE reads) of published models.
# meta-llama/Llama-3.1-8B.
LLAMA31_8B = {
    "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192,
                     "rope_type": "llama3"}}
# Qwen/Qwen2-7B-Instruct with the rope_scaling its model card adds for
# inputs over 32768 tokens (the older `type` key).
QWEN2_7B_YARN = {
    "hidden_size": 3584, "num_attention_heads": 28,
    "num_key_value_heads": 4, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "yarn", "factor": 4.0,
                     "original_max_position_embeddings": 32768}}
# microsoft/Phi-3-mini-128k-instruct's layout: head_dim 3072 / 32 = 96, so 48
# factors per list, and original_max_position_embeddings at the top level,
# outside rope_scaling. The factor values are illustrative (rising with the
# pair index as LongRoPE's searched factors do), not the published ones.
PHI3_SHORT = [round(1.0 + 1.9 * (i / 47) ** 3, 6) for i in range(48)]
PHI3_LONG = [round(1.0 + 63.0 * (i / 47) ** 2, 6) for i in range(48)]
PHI3_MINI_128K = {
    "hidden_size": 3072, "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": PHI3_SHORT,
                     "long_factor": PHI3_LONG}}
# google/gemma-2-2b: head_dim 256, not hidden_size / heads = 288.
GEMMA2_2B = {
    "hidden_size": 2304, "num_attention_heads": 8, "head_dim": 256,
    "max_position_embeddings": 8192, "rope_theta": 10000.0}
# google/gemma-3-4b-it's text model as Gemma3TextConfig loads it: sliding
# layers turn at rope_local_base_freq with plain RoPE, full-attention layers
# at rope_theta with rope_scaling.
GEMMA3_4B = {
    "model_type": "gemma3",
    "text_config": {
        "hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256,
        "max_position_embeddings": 131072, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "sliding_window": 1024}}


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

    # -- scaling dicts and HF configs --------------------------------------

    def rotate_like_hf(self, spec, positions, inv_freq, attention_factor,
                       head_dim=None):
        """apply_rope(spec=spec) on a [1, 2, T, D] query at `positions`,
        checked against HF's formula with inv_freq and attention_factor;
        returns the result."""
        head_dim = head_dim or spec.rotary_dim
        rng = np.random.default_rng(head_dim)
        query = rng.standard_normal(
            (1, 2, len(positions), head_dim)).astype(np.float32)
        position_ids = np.asarray(positions)[None, :]
        result = self.client.apply_rope(query, position_ids=position_ids,
                                        spec=spec)
        np.testing.assert_allclose(
            result.query,
            hf_rope(query, position_ids, spec.rotary_dim or head_dim,
                    inv_freq=inv_freq, attention_factor=attention_factor),
            rtol=0, atol=FLOAT32_ATOL * max(1.0, attention_factor))
        self.assertAlmostEqual(result.attention_factor, attention_factor,
                               places=12)
        return result

    def test_scaling_dict_with_a_misspelt_key_names_it(self):
        cases = [
            # Phasor's own form: RopeScaling's fields.
            ("scaling.llama3.low_freq_factr",
             dict(rotary_dim=16, scaling={"llama3": {
                 "factor": 8.0, "low_freq_factr": 1.0}})),
            # HF's form, as rope_scaling holds it.
            ("scaling.low_freq_factr",
             dict(rotary_dim=16, scaling={"rope_type": "llama3",
                                          "factor": 8.0,
                                          "low_freq_factr": 1.0})),
            # spec=, which checked its keys already.
            ("spec.rope.scaling.llama3.low_freq_factr",
             dict(spec={"rope": {"rotary_dim": 16, "scaling": {
                 "llama3": {"factor": 8.0, "low_freq_factr": 1.0}}}})),
        ]
        for field, arguments in cases:
            with self.subTest(field=field):
                with self.assertRaises(InvalidInputError) as raised:
                    self.client.apply_rope(self.query, **arguments)
                self.assertNotIsInstance(raised.exception, AttributeError)
                self.assertEqual(raised.exception.code(),
                                 grpc.StatusCode.INVALID_ARGUMENT)
                (violation, description), = \
                    raised.exception.field_violations()
                self.assertEqual(violation, field)
                for valid in ("factor", "low_freq_factor", "high_freq_factor",
                              "original_max_position_embeddings"):
                    self.assertIn(valid, description)
        # A wrong value, an unknown HF type and two kinds at once are
        # refused as well, naming the key; rope_tables reads scaling alike.
        for field, scaling in (
                ("scaling.llama3.factor", {"llama3": {"factor": "8"}}),
                ("scaling.rope_type", {"rope_type": "llama4"}),
                ("scaling.linear", {"yarn": {"factor": 2.0},
                                    "linear": {"factor": 2.0}}),
                ("scaling", "yarn { factr: 2 }")):
            with self.subTest(field=field):
                with self.assertRaises(InvalidInputError) as raised:
                    self.client.rope_tables(count=4, rotary_dim=16,
                                            scaling=scaling)
                self.assertEqual(raised.exception.field_violations()[0][0],
                                 field)

    def test_hf_rope_scaling_dict_as_is(self):
        positions = np.array([0, 1, 4095, 8192, 65536, 131071])
        llama = LLAMA31_8B["rope_scaling"]
        rng = np.random.default_rng(13)
        query = rng.standard_normal((1, 2, 6, 128)).astype(np.float32)
        hf_form = self.client.apply_rope(
            query, position_ids=positions[None], rotary_dim=128,
            base=500000.0, max_position_embeddings=131072, scaling=llama)
        own_form = self.client.apply_rope(
            query, position_ids=positions[None], rotary_dim=128,
            base=500000.0, max_position_embeddings=131072,
            scaling={"llama3": {key: value for key, value in llama.items()
                                if key != "rope_type"}})
        np.testing.assert_array_equal(hf_form.query, own_form.query)
        np.testing.assert_allclose(
            hf_form.query,
            hf_rope(query, positions[None], 128, inv_freq=hf_llama3_inv_freq(
                128, 500000.0, 8.0, 1.0, 4.0, 8192)),
            rtol=0, atol=FLOAT32_ATOL)
        # The older `type` key, and rope_theta inside the dict as the base.
        yarn = dict(QWEN2_7B_YARN["rope_scaling"], rope_theta=1000000.0)
        result = self.client.apply_rope(query, position_ids=positions[None],
                                        rotary_dim=128, scaling=yarn)
        inv_freq, attention_factor = hf_yarn_inv_freq(128, 1e6, 4.0, 32768)
        np.testing.assert_allclose(
            result.query, hf_rope(query, positions[None], 128,
                                  inv_freq=inv_freq,
                                  attention_factor=attention_factor),
            rtol=0, atol=FLOAT32_ATOL * attention_factor)
        self.assertAlmostEqual(result.attention_factor, attention_factor,
                               places=12)
        with self.assertRaisesRegex(InvalidInputError, "disagrees with base"):
            self.client.apply_rope(query, rotary_dim=128, base=10000.0,
                                   scaling=yarn)

    def test_longrope_dict_equals_the_spec_form(self):
        longrope = {"short_factor": PHI3_SHORT, "long_factor": PHI3_LONG,
                    "original_max_position_embeddings": 4096}
        message = pb.EncoderSpec()
        message.rope.rotary_dim = 96
        message.rope.max_position_embeddings = 131072
        message.rope.scaling.longrope.short_factor.extend(PHI3_SHORT)
        message.rope.scaling.longrope.long_factor.extend(PHI3_LONG)
        message.rope.scaling.longrope.original_max_position_embeddings = 4096
        rng = np.random.default_rng(15)
        query = rng.standard_normal((1, 2, 4, 96)).astype(np.float32)
        # Short factors below L0 = 4096 tokens, long ones above.
        for positions in (np.array([0, 1, 2, 4095]),
                          np.array([0, 4096, 70000, 131071])):
            with self.subTest(seq_len=int(positions.max()) + 1):
                keywords = self.client.apply_rope(
                    query, position_ids=positions[None], rotary_dim=96,
                    max_position_embeddings=131072,
                    scaling={"longrope": longrope})
                hf_dict = self.client.apply_rope(
                    query, position_ids=positions[None], rotary_dim=96,
                    max_position_embeddings=131072,
                    scaling=dict(longrope, rope_type="longrope"))
                spec_dict = self.client.apply_rope(
                    query, position_ids=positions[None], spec={"rope": {
                        "rotary_dim": 96, "max_position_embeddings": 131072,
                        "scaling": {"longrope": longrope}}})
                spec_message = self.client.apply_rope(
                    query, position_ids=positions[None], spec=message)
                for other in (hf_dict, spec_dict, spec_message):
                    np.testing.assert_array_equal(other.query,
                                                  keywords.query)
                    self.assertEqual(other.attention_factor,
                                     keywords.attention_factor)
                inv_freq, attention_factor = hf_longrope_inv_freq(
                    96, 10000.0, PHI3_SHORT, PHI3_LONG, 4096, 131072,
                    int(positions.max()) + 1)
                np.testing.assert_allclose(
                    keywords.query,
                    hf_rope(query, positions[None], 96, inv_freq=inv_freq,
                            attention_factor=attention_factor),
                    rtol=0, atol=FLOAT32_ATOL * attention_factor)

    def test_rope_spec_from_hf_llama31(self):
        spec = phasor_client.rope_spec_from_hf(LLAMA31_8B)
        self.assertIsInstance(spec, pb.RopeSpec)
        self.assertEqual(spec.rotary_dim, 128)            # 4096 / 32
        self.assertEqual(spec.base, 500000.0)
        self.assertEqual(spec.layout, pb.RopeSpec.HALF)
        self.assertEqual(spec.max_position_embeddings, 131072)
        self.assertEqual(spec.scaling.WhichOneof("kind"), "llama3")
        llama3 = spec.scaling.llama3
        self.assertEqual((llama3.factor, llama3.low_freq_factor,
                          llama3.high_freq_factor,
                          llama3.original_max_position_embeddings),
                         (8.0, 1.0, 4.0, 8192))
        self.rotate_like_hf(spec, [0, 1, 2047, 8191, 8192, 100000, 131071],
                            hf_llama3_inv_freq(128, 500000.0, 8.0, 1.0, 4.0,
                                               8192), 1.0)

    def test_rope_spec_from_hf_qwen2_yarn(self):
        spec = phasor_client.rope_spec_from_hf(QWEN2_7B_YARN)
        self.assertEqual(spec.rotary_dim, 128)            # 3584 / 28
        self.assertEqual(spec.base, 1e6)
        self.assertEqual(spec.max_position_embeddings, 32768)
        self.assertEqual(spec.scaling.WhichOneof("kind"), "yarn")
        yarn = spec.scaling.yarn
        self.assertEqual(yarn.factor, 4.0)
        self.assertEqual(yarn.original_max_position_embeddings, 32768)
        for absent in ("beta_fast", "beta_slow", "attention_factor",
                       "mscale", "mscale_all_dim", "truncate"):
            self.assertFalse(yarn.HasField(absent), absent)
        inv_freq, attention_factor = hf_yarn_inv_freq(128, 1e6, 4.0, 32768)
        self.rotate_like_hf(spec, [0, 1, 1000, 32767, 32768, 131071],
                            inv_freq, attention_factor)

    def test_rope_spec_from_hf_phi3_longrope(self):
        spec = phasor_client.rope_spec_from_hf(PHI3_MINI_128K)
        self.assertEqual(spec.rotary_dim, 96)             # 3072 / 32
        self.assertEqual(spec.base, 10000.0)
        self.assertEqual(spec.max_position_embeddings, 131072)
        longrope = spec.scaling.longrope
        self.assertEqual(list(longrope.short_factor), PHI3_SHORT)
        self.assertEqual(list(longrope.long_factor), PHI3_LONG)
        # From the top level: rope_scaling has none.
        self.assertEqual(longrope.original_max_position_embeddings, 4096)
        self.assertFalse(longrope.HasField("factor"))     # 131072 / 4096
        for positions in ([0, 1, 2, 4095], [0, 4095, 4096, 131071]):
            inv_freq, attention_factor = hf_longrope_inv_freq(
                96, 10000.0, PHI3_SHORT, PHI3_LONG, 4096, 131072,
                max(positions) + 1)
            self.rotate_like_hf(spec, positions, inv_freq, attention_factor)
        # A top-level original length wins over the dict's (HF's
        # standardize_rope_params).
        config = dict(PHI3_MINI_128K, rope_scaling=dict(
            PHI3_MINI_128K["rope_scaling"],
            original_max_position_embeddings=8192))
        self.assertEqual(phasor_client.rope_spec_from_hf(config).scaling
                         .longrope.original_max_position_embeddings, 4096)

    def test_rope_spec_from_hf_gemma_layer_types(self):
        gemma2 = phasor_client.rope_spec_from_hf(GEMMA2_2B)
        self.assertEqual((gemma2.rotary_dim, gemma2.base,
                          gemma2.max_position_embeddings),
                         (256, 10000.0, 8192))
        self.assertFalse(gemma2.HasField("scaling"))
        self.rotate_like_hf(gemma2, [0, 5, 8191],
                            reference.rope_inv_freq(256, 10000.0), 1.0)
        # Gemma 2's layers share one RoPE: any layer type gives it.
        self.assertEqual(phasor_client.rope_spec_from_hf(
            GEMMA2_2B, layer_type="sliding_attention"), gemma2)

        # Gemma 3: per layer type, from text_config.
        with self.assertRaises(InvalidInputError) as raised:
            phasor_client.rope_spec_from_hf(GEMMA3_4B)
        self.assertEqual(raised.exception.field_violations()[0][0],
                         "layer_type")
        self.assertIn("full_attention, sliding_attention",
                      raised.exception.details())
        local = phasor_client.rope_spec_from_hf(
            GEMMA3_4B, layer_type="sliding_attention")
        self.assertEqual((local.rotary_dim, local.base), (256, 10000.0))
        self.assertFalse(local.HasField("scaling"))
        self.rotate_like_hf(local, [0, 1, 1023, 50000],
                            reference.rope_inv_freq(256, 10000.0), 1.0)
        full = phasor_client.rope_spec_from_hf(GEMMA3_4B,
                                               layer_type="full_attention")
        self.assertEqual((full.rotary_dim, full.base,
                          full.max_position_embeddings),
                         (256, 1e6, 131072))
        self.assertEqual(full.scaling.WhichOneof("kind"), "linear")
        self.assertEqual(full.scaling.linear.factor, 8.0)
        self.rotate_like_hf(full, [0, 1, 1023, 131071],
                            reference.rope_inv_freq(256, 1e6) / 8.0, 1.0)
        # The same model in the per-layer rope_parameters form, whose
        # sliding entry leaves the base to rope_local_base_freq.
        text = dict(GEMMA3_4B["text_config"])
        del text["rope_scaling"]
        text["layer_types"] = ["sliding_attention"] * 5 + ["full_attention"]
        text["rope_parameters"] = {
            "full_attention": {"rope_type": "linear", "factor": 8.0},
            "sliding_attention": {"rope_type": "default"}}
        for layer_type, expected in (("sliding_attention", local),
                                     ("full_attention", full)):
            self.assertEqual(phasor_client.rope_spec_from_hf(
                text, layer_type=layer_type), expected)
        with self.assertRaisesRegex(InvalidInputError, "chunked_attention"):
            phasor_client.rope_spec_from_hf(text,
                                            layer_type="chunked_attention")

    def test_rope_spec_from_hf_refuses_what_it_cannot_map(self):
        cases = [
            ("config.rope_scaling.rope_type", "'llama4' is not",
             dict(LLAMA31_8B, rope_scaling=dict(LLAMA31_8B["rope_scaling"],
                                                rope_type="llama4"))),
            ("config.rope_scaling.low_freq_factr", "low_freq_factor",
             dict(LLAMA31_8B, rope_scaling={"rope_type": "llama3",
                                            "factor": 8.0,
                                            "low_freq_factr": 1.0})),
            ("config.rope_scaling.factor", "expected a number",
             dict(LLAMA31_8B, rope_scaling={"rope_type": "linear",
                                            "factor": "8"})),
            ("config.head_dim", "hidden_size and num_attention_heads",
             {"rope_theta": 10000.0}),
            ("config", "got list", [("rope_theta", 10000.0)]),
        ]
        for field, words, config in cases:
            with self.subTest(field=field):
                with self.assertRaises(InvalidInputError) as raised:
                    phasor_client.rope_spec_from_hf(config)
                self.assertEqual(raised.exception.field_violations()[0][0],
                                 field)
                self.assertIn(words, raised.exception.details())
        with self.assertRaises(InvalidInputError) as raised:
            phasor_client.rope_spec_from_hf(
                dict(LLAMA31_8B, rope_scaling={"rope_type": "llama4"}))
        for supported in ("default", "linear", "dynamic", "yarn", "longrope",
                          "llama3", "proportional"):
            self.assertIn(supported, raised.exception.details())

    def test_hf_fp32_pipeline_drifts_at_large_positions(self):
        """docs/CLIENT.md's figure: HF's fp32 RoPE (inv_freq and
        position·inv_freq rounded to float32) against Phasor's, whose
        angles are exact before the one rounding of the result."""
        dim, base = 128, 10000.0
        positions = np.arange(0, 120001, 30)
        rng = np.random.default_rng(20)
        query = rng.standard_normal((1, 1, len(positions), dim)).astype(
            np.float32)
        served = self.client.apply_rope(query, position_ids=positions[None],
                                        rotary_dim=dim, base=base).query
        exact = hf_rope(query, positions[None], dim, base)
        # HF's LlamaRotaryEmbedding in float32: inv_freq = 1 / base **
        # (arange(0, d, 2) / d), freqs = inv_freq @ position_ids, cos, sin.
        inv_freq = np.float32(1) / np.float32(base) ** (
            np.arange(0, dim, 2).astype(np.float32) / np.float32(dim))
        angles = positions.astype(np.float32)[:, None] * inv_freq
        emb = np.concatenate([angles, angles], axis=-1)
        hf_fp32 = (query * np.cos(emb) + rotate_half(query) * np.sin(emb))
        self.assertEqual(hf_fp32.dtype, np.float32)
        phasor_error = np.abs(served - exact).max()
        hf_error = np.abs(hf_fp32 - exact).max()
        apart = np.abs(hf_fp32 - served).max()
        print(f"\npositions 0..120000, D {dim}, base {base:g}: max |HF fp32 "
              f"- Phasor| {apart:.3g}, |Phasor - float64| "
              f"{phasor_error:.3g}, |HF fp32 - float64| {hf_error:.3g}")
        self.assertLessEqual(phasor_error, FLOAT32_ATOL)
        # An angle near 1.2e5 rad in float32 is off by up to half an ulp,
        # 2^-8 rad: the difference is HF's.
        self.assertGreater(hf_error, 1e-2)
        self.assertGreater(apart, 1e-2)
        self.assertLess(apart, 5e-2)

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
