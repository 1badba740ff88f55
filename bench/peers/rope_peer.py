"""Peer of bench/rope_bench.cc: PyTorch eager RoPE as HF transformers writes it.

HALF layout: LLaMA's `rotate_half` / `apply_rotary_pos_emb`
(transformers/models/llama/modeling_llama.py), on q viewed as HF views it:
the projection output [1, T, H, D] transposed to [1, H, T, D], cos/sin
[1, T, D] unsqueezed at dim 1.
INTERLEAVED layout: GPT-J's `rotate_every_two` with `repeat_interleave`d
sin/cos (transformers/models/gptj/modeling_gptj.py), on [1, T, H, D].

Two timings per shape:
  impl=torch_cached   cos/sin computed once outside the timed call (older HF
                      cached them up to max_position_embeddings); only the
                      rotation is timed.
  impl=torch_uncached HF's current per-call path: LlamaRotaryEmbedding.forward
                      (inv_freq @ positions in float32, cat, cos/sin times
                      attention_scaling, cast to the input dtype), then the
                      rotation.
Scaling "yarn" is HF's _compute_yarn_parameters (factor 4, original context
4096, beta_fast 32, beta_slow 1, truncate) written out below; inv_freq and
the attention factor are computed once, as HF does at model load.

Positions are 0..T-1, or 7919·t mod 4T ("scattered"), as in rope_bench.cc.
"""
import math
import re
import sys

import numpy as np
import torch

import common

HEADS = 32
HEAD_DIM = 128
BASE = 10000.0


def yarn_parameters(dim, base, factor=4.0, original=4096, beta_fast=32.0, beta_slow=1.0,
                    dtype=torch.float32):
    """HF modeling_rope_utils._compute_yarn_parameters; float32 as in HF, or
    float64 for the reference."""
    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=dtype) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=dtype) / dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    attention = 0.1 * math.log(factor) + 1.0
    return inv_freq, attention


def default_parameters(dim, base, dtype=torch.float32):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim))
    return inv_freq, 1.0


# --- HF LLaMA (HALF) ---------------------------------------------------------
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def llama_cos_sin(inv_freq, attention, position_ids, dtype):
    """LlamaRotaryEmbedding.forward: float32 angles, cast to the input dtype."""
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * attention
    sin = emb.sin() * attention
    return cos.to(dtype=dtype), sin.to(dtype=dtype)


def llama_apply(q, cos, sin):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin)


# --- HF GPT-J (INTERLEAVED) --------------------------------------------------
def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def gptj_sin_cos(inv_freq, attention, positions, dtype):
    """GPT-J's create_sinusoidal_positions, taken at the positions."""
    sinusoid = torch.einsum("i,j->ij", positions.float(), inv_freq).float()
    return ((torch.sin(sinusoid) * attention).to(dtype)[None],
            (torch.cos(sinusoid) * attention).to(dtype)[None])


def gptj_apply(tensor, sin, cos):
    sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    return (tensor * cos) + (rotate_every_two(tensor) * sin)


# -----------------------------------------------------------------------------
def positions_for(tokens, scattered):
    t = torch.arange(tokens, dtype=torch.int64)
    return (t * 7919) % (4 * tokens) if scattered else t


def make_query(tokens, dtype):
    x = torch.from_numpy(common.input_values(tokens * HEADS * HEAD_DIM))
    return x.reshape(1, tokens, HEADS, HEAD_DIM).to(dtype)


def make_case(tokens, dtype, layout, scaling, scattered):
    """Returns (cached_fn, uncached_fn); each returns [1, T, H, D] output."""
    inv_freq, attention = (yarn_parameters if scaling == "yarn" else default_parameters)(
        HEAD_DIM, BASE)
    q = make_query(tokens, dtype)
    positions = positions_for(tokens, scattered)
    if layout == "half":
        q_hf = q.transpose(1, 2)  # [1, H, T, D] view, as HF's attention has it.
        position_ids = positions[None]
        cos, sin = llama_cos_sin(inv_freq, attention, position_ids, dtype)

        def cached():
            return llama_apply(q_hf, cos, sin).transpose(1, 2)

        def uncached():
            c, s = llama_cos_sin(inv_freq, attention, position_ids, dtype)
            return llama_apply(q_hf, c, s).transpose(1, 2)
    else:
        sin, cos = gptj_sin_cos(inv_freq, attention, positions, dtype)

        def cached():
            return gptj_apply(q, sin, cos)

        def uncached():
            s, c = gptj_sin_cos(inv_freq, attention, positions, dtype)
            return gptj_apply(q, s, c)
    return cached, uncached


def reference(tokens, layout, scaling, dtype):
    """float64 rotation of the same input (bf16 input widened exactly), with
    θ and the attention factor in float64 too."""
    inv_freq, attention = (yarn_parameters if scaling == "yarn" else default_parameters)(
        HEAD_DIM, BASE, dtype=torch.float64)
    x = make_query(tokens, dtype).double().numpy()[0]
    theta = inv_freq.double().numpy()
    angle = np.arange(tokens, dtype=np.float64)[:, None] * theta
    c = (np.cos(angle) * attention)[:, None, :]
    s = (np.sin(angle) * attention)[:, None, :]
    half = HEAD_DIM // 2
    out = np.empty_like(x)
    if layout == "half":
        lo, hi = x[..., :half], x[..., half:]
        out[..., :half] = lo * c - hi * s
        out[..., half:] = hi * c + lo * s
    else:
        ev, od = x[..., 0::2], x[..., 1::2]
        out[..., 0::2] = ev * c - od * s
        out[..., 1::2] = od * c + ev * s
    return out


def load_phasor(directory, dtype_tag, layout, scaling, tokens):
    name = f"rope_{dtype_tag}_{layout}_{scaling}_T{tokens}.bin"
    shape = (tokens, HEADS, HEAD_DIM)
    if dtype_tag == "fp32":
        return common.load_raw(directory, name, np.float32, shape).astype(np.float64)
    bits = common.load_raw(directory, name, np.uint16, shape).astype(np.uint32) << 16
    return bits.view(np.float32).astype(np.float64)


def check(directory):
    tokens = 4096
    ok = True
    for dtype_tag, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for layout in ("half", "interleaved"):
            for scaling in ("none", "yarn"):
                phasor = load_phasor(directory, dtype_tag, layout, scaling, tokens)
                cached, _ = make_case(tokens, dtype, layout, scaling, False)
                peer = cached()[0].double().numpy()
                ref = reference(tokens, layout, scaling, dtype)
                label = f"rope/{dtype_tag}/{layout}/{scaling}/T={tokens}"
                err_phasor = float(np.max(np.abs(phasor - ref)))
                err_peer = float(np.max(np.abs(peer - ref)))
                print(f"accuracy {label:40s} phasor {err_phasor:.3e}  torch {err_peer:.3e}"
                      " (max |x - float64 reference|)", file=sys.stderr)
                print(f"ACCURACY {label}/impl=phasor {err_phasor:.6e}")
                print(f"ACCURACY {label}/impl=torch {err_peer:.6e}")
                # Same numbers: torch forms the angle p·θ in float32, so its
                # cos/sin are off by up to about p·2^-24 rad (T·2^-24 ≈ 2.4e-4
                # here, times |x| <= 1 and the attention factor); bf16 adds a
                # few bf16 ulps (2^-8 relative) from rounding after each op.
                atol = 4 * tokens * 2.0 ** -24 * 1.2 * 2 if dtype_tag == "fp32" else 3 * 2.0 ** -7
                ok &= common.check_close(label + " phasor vs torch", phasor, peer, atol)
                # Phasor rounds once: within float32 rounding of |x| <= sqrt(2)
                # (plus the attention factor) for fp32, and within half a bf16
                # ulp (2^-8 at [1, 2)) plus that for bf16.
                ok &= err_phasor <= (1e-6 if dtype_tag == "fp32" else 2.0 ** -8 + 1e-6)
    return ok


def main():
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    if args.check:
        sys.exit(0 if check(args.check) else 1)
    sizes = [1, 128, 4096] if args.small else [1, 128, 4096, 32768]
    results = common.Results(args)

    def add_case(name, tokens, dtype, layout, scaling, scattered):
        impls = [impl for impl in ("torch_cached", "torch_uncached")
                 if not args.filter or re.search(args.filter, f"{name}/impl={impl}")]
        if not impls:
            return
        cached, uncached = make_case(tokens, dtype, layout, scaling, scattered)
        for impl in impls:
            results.add(f"{name}/impl={impl}", cached if impl == "torch_cached" else uncached)

    for threads in common.thread_counts(args):
        torch.set_num_threads(threads)
        for tokens in sizes:
            for dtype_tag, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
                for layout in ("half", "interleaved"):
                    for scaling in ("none", "yarn"):
                        add_case(f"rope/dtype={dtype_tag}/layout={layout}/scaling={scaling}"
                                 f"/pos=contiguous/T={tokens}/threads={threads}",
                                 tokens, dtype, layout, scaling, False)
            if tokens >= 128:
                add_case(f"rope/dtype=fp32/layout=half/scaling=none/pos=scattered"
                         f"/T={tokens}/threads={threads}",
                         tokens, torch.float32, "half", "none", True)
    results.write("rope")


if __name__ == "__main__":
    main()
