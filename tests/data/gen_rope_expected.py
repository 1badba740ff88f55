#!/usr/bin/python3
"""Writes tests/data/rope_expected.txt: RoPE inverse frequencies, attention
factors and a few cos/sin values for every scaling variant, computed
independently of core/ with torch in float64.

Run:  /usr/bin/python3 tests/data/gen_rope_expected.py   (needs python3-torch)

Where each formula comes from (re-derived here, not copied):
  * plain RoPE:  theta_i = base^(-2i/rd)  -- Su et al., "RoFormer" (2021), eq. 15;
    HF transformers src/transformers/modeling_rope_utils.py,
    `_compute_default_rope_parameters`.
  * linear:      theta_i / factor  -- HF `_compute_linear_scaling_rope_parameters`
    (kaiokendev's position interpolation).
  * ntk:         base * factor^(rd/(rd-2))  -- the static NTK-aware base change
    (bloc97); HF's dynamic variant evaluated with its stretch term equal to
    `factor`. (vLLM's `ntk` rope type is a different formula.)
  * dynamic:     base * (factor*L/L0 - (factor-1))^(rd/(rd-2)), L = max(seq_len, L0)
    -- HF `_compute_dynamic_ntk_parameters` (emozilla), L0 = max_position_embeddings.
  * yarn:        Peng et al., "YaRN" (arXiv 2309.00071) as in HF `_compute_yarn_parameters`
    on main: correction dims from original_max_position_embeddings with
    beta_fast/beta_slow, floor/ceil only when truncate, clamp to [0, rd-1],
    +0.001 when the range is empty, linear ramp between theta/factor and theta;
    attention factor from `get_mscale` (0.1*m*ln f + 1, 1 when f <= 1), as the
    ratio get_mscale(f, mscale)/get_mscale(f, mscale_all_dim) when both are
    set and non-zero, or the given attention_factor; factor defaults to
    max_position_embeddings/original_max_position_embeddings only when absent.
  * longrope:    HF `_compute_longrope_parameters`: theta_i / ext_i, ext = long
    factors when seq_len > original_max_position_embeddings, else short;
    attention factor sqrt(1 + ln f / ln original) (1 when f <= 1) unless given,
    f = factor or max_position_embeddings / original_max_position_embeddings.
  * llama3:      HF `_compute_llama3_parameters` (Meta's Llama 3.1 reference):
    wavelength 2*pi/theta above original/low_freq_factor -> theta/factor, below
    original/high_freq_factor -> theta, in between a linear blend with
    smooth = (original/wavelength - low) / (high - low).
  * proportional: HF `_compute_proportional_rope_parameters` (Gemma 4):
    k = int(partial_rotary_factor * head_dim // 2) pairs at
    base^(-2i/head_dim), the remaining head_dim/2 - k pairs 0, all / factor.
HF computes in float32; this script uses float64 so the C++ test (also double)
can compare to ~1e-12.
"""

import math
import os

import torch

DT = torch.float64


def plain_inv_freq(base, rd):
    exponents = torch.arange(0, rd, 2, dtype=DT) / rd
    return 1.0 / torch.pow(torch.tensor(base, dtype=DT), exponents)


def linear(cfg, seq_len):
    return plain_inv_freq(cfg["base"], cfg["rd"]) / cfg["factor"], 1.0


def ntk_base(base, stretch, rd):
    return base * stretch ** (rd / (rd - 2))


def ntk(cfg, seq_len):
    base = ntk_base(cfg["base"], cfg["factor"], cfg["rd"])
    return plain_inv_freq(base, cfg["rd"]), 1.0


def dynamic(cfg, seq_len):
    l0 = cfg["max_position_embeddings"]
    length = max(seq_len, l0)
    stretch = cfg["factor"] * length / l0 - (cfg["factor"] - 1)
    return plain_inv_freq(ntk_base(cfg["base"], stretch, cfg["rd"]), cfg["rd"]), 1.0


def mscale_of(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def yarn(cfg, seq_len):
    rd, base = cfg["rd"], cfg["base"]
    original = cfg.get("original_max_position_embeddings", cfg.get("max_position_embeddings"))
    factor = cfg.get("factor")
    if factor is None:
        factor = cfg["max_position_embeddings"] / original
    if cfg.get("attention_factor") is not None:
        attention = cfg["attention_factor"]
    elif cfg.get("mscale") and cfg.get("mscale_all_dim"):
        attention = mscale_of(factor, cfg["mscale"]) / mscale_of(factor, cfg["mscale_all_dim"])
    else:
        attention = mscale_of(factor)
    beta_fast = cfg.get("beta_fast", 32.0)
    beta_slow = cfg.get("beta_slow", 1.0)

    def dim_for(rotations):
        # Dimension whose wavelength fits `rotations` times into the original context.
        return rd * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_for(beta_fast), dim_for(beta_slow)
    if cfg.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rd - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(rd // 2, dtype=DT) - low) / (high - low), 0.0, 1.0)
    theta = plain_inv_freq(base, rd)
    keep = 1.0 - ramp  # weight of the unscaled (extrapolated) frequency
    inv = (theta / factor) * (1.0 - keep) + theta * keep
    return inv, attention


def longrope(cfg, seq_len):
    rd, base = cfg["rd"], cfg["base"]
    original = cfg.get("original_max_position_embeddings", cfg.get("max_position_embeddings"))
    attention = cfg.get("attention_factor")
    if attention is None:
        factor = cfg.get("factor")
        if factor is None:
            factor = cfg["max_position_embeddings"] / original
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = cfg["long_factor"] if seq_len > original else cfg["short_factor"]
    return plain_inv_freq(base, rd) / torch.tensor(ext, dtype=DT), attention


def llama3(cfg, seq_len):
    rd, base = cfg["rd"], cfg["base"]
    factor = cfg["factor"]
    low_f = cfg.get("low_freq_factor", 1.0)
    high_f = cfg.get("high_freq_factor", 4.0)
    original = cfg.get("original_max_position_embeddings", 8192)
    theta = plain_inv_freq(base, rd)
    out = theta.clone()
    for i in range(theta.numel()):
        t = theta[i].item()
        wavelength = 2 * math.pi / t
        if wavelength > original / low_f:
            out[i] = t / factor
        elif wavelength < original / high_f:
            out[i] = t
        else:
            smooth = (original / wavelength - low_f) / (high_f - low_f)
            out[i] = (1 - smooth) * t / factor + smooth * t
    return out, 1.0


def proportional(cfg, seq_len):
    rd = cfg["rd"]
    rotated = int(cfg.get("partial_rotary_factor", 1.0) * rd // 2)
    out = plain_inv_freq(cfg["base"], rd)
    out[rotated:] = 0.0
    return out / cfg.get("factor", 1.0), 1.0


def plain(cfg, seq_len):
    return plain_inv_freq(cfg["base"], cfg["rd"]), 1.0


COMPUTE = {
    "default": plain,
    "linear": linear,
    "ntk": ntk,
    "dynamic": dynamic,
    "yarn": yarn,
    "longrope": longrope,
    "llama3": llama3,
    "proportional": proportional,
}

# Fields written on the `scaling` line (everything except rd/base/seq_len/type).
SCALING_KEYS = [
    "factor", "max_position_embeddings", "original_max_position_embeddings",
    "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor",
    "truncate", "low_freq_factor", "high_freq_factor", "short_factor", "long_factor",
    "partial_rotary_factor",
]

SHORT8 = [1.0, 1.02, 1.05, 1.1, 1.3, 1.7, 2.4, 3.1]
LONG8 = [1.1, 1.3, 1.8, 2.9, 5.5, 9.0, 14.0, 22.5]

CASES = [
    ("none_rd128", dict(type="default", rd=128, base=10000.0), 16),
    ("none_rd64_base1e6", dict(type="default", rd=64, base=1e6), 16),
    ("linear_f4", dict(type="linear", rd=64, base=10000.0, factor=4.0), 16),
    ("linear_f2_llama3base", dict(type="linear", rd=128, base=500000.0, factor=2.0), 16),
    ("ntk_f4", dict(type="ntk", rd=128, base=10000.0, factor=4.0), 16),
    ("ntk_f2p5_rd64", dict(type="ntk", rd=64, base=1e6, factor=2.5), 16),
    ("dynamic_below_l0", dict(type="dynamic", rd=128, base=10000.0, factor=2.0,
                              max_position_embeddings=2048), 1000),
    ("dynamic_at_l0", dict(type="dynamic", rd=128, base=10000.0, factor=2.0,
                           max_position_embeddings=2048), 2048),
    ("dynamic_above_l0", dict(type="dynamic", rd=128, base=10000.0, factor=2.0,
                              max_position_embeddings=2048), 8192),
    ("dynamic_f4_just_above", dict(type="dynamic", rd=64, base=10000.0, factor=4.0,
                                   max_position_embeddings=4096), 4097),
    ("yarn_f4_defaults", dict(type="yarn", rd=128, base=10000.0, factor=4.0,
                              original_max_position_embeddings=4096), 16),
    ("yarn_deepseek_mscale_equal", dict(type="yarn", rd=64, base=10000.0, factor=40.0,
                                        original_max_position_embeddings=4096,
                                        mscale=1.0, mscale_all_dim=1.0), 16),
    ("yarn_mscale_ratio", dict(type="yarn", rd=64, base=10000.0, factor=40.0,
                               original_max_position_embeddings=4096,
                               mscale=1.0, mscale_all_dim=0.707), 16),
    ("yarn_only_mscale", dict(type="yarn", rd=64, base=10000.0, factor=16.0,
                              original_max_position_embeddings=4096, mscale=0.707), 16),
    ("yarn_no_truncate_gptoss", dict(type="yarn", rd=64, base=150000.0, factor=32.0,
                                     original_max_position_embeddings=4096,
                                     beta_fast=32.0, beta_slow=1.0, truncate=False), 16),
    ("yarn_factor_from_max_qwen", dict(type="yarn", rd=128, base=1000000.0,
                                       original_max_position_embeddings=32768,
                                       max_position_embeddings=131072), 16),
    ("yarn_given_attention_betas", dict(type="yarn", rd=96, base=10000.0, factor=8.0,
                                        original_max_position_embeddings=2048,
                                        beta_fast=16.0, beta_slow=2.0,
                                        attention_factor=0.5), 16),
    ("yarn_empty_range", dict(type="yarn", rd=16, base=10000.0, factor=2.0,
                              original_max_position_embeddings=6), 16),
    ("longrope_short", dict(type="longrope", rd=16, base=10000.0,
                            original_max_position_embeddings=4096,
                            max_position_embeddings=131072,
                            short_factor=SHORT8, long_factor=LONG8), 4096),
    ("longrope_long", dict(type="longrope", rd=16, base=10000.0,
                           original_max_position_embeddings=4096,
                           max_position_embeddings=131072,
                           short_factor=SHORT8, long_factor=LONG8), 4097),
    ("longrope_factor_given", dict(type="longrope", rd=16, base=10000.0,
                                   original_max_position_embeddings=8192, factor=4.0,
                                   short_factor=SHORT8, long_factor=LONG8), 100000),
    ("longrope_attention_given", dict(type="longrope", rd=16, base=10000.0,
                                      original_max_position_embeddings=8192,
                                      attention_factor=1.25,
                                      short_factor=SHORT8, long_factor=LONG8), 10),
    ("llama3_1", dict(type="llama3", rd=128, base=500000.0, factor=8.0,
                      low_freq_factor=1.0, high_freq_factor=4.0,
                      original_max_position_embeddings=8192), 16),
    ("llama3_2_f32_rd64", dict(type="llama3", rd=64, base=500000.0, factor=32.0,
                               low_freq_factor=1.0, high_freq_factor=4.0,
                               original_max_position_embeddings=8192), 16),
    ("llama3_custom_bands", dict(type="llama3", rd=128, base=10000.0, factor=4.0,
                                 low_freq_factor=2.0, high_freq_factor=8.0,
                                 original_max_position_embeddings=2048), 16),
    # Gemma 4's global layers: head_dim 512, a quarter of the pairs rotate.
    ("proportional_gemma4", dict(type="proportional", rd=512, base=1000000.0,
                                 partial_rotary_factor=0.25), 16),
    ("proportional_f8_odd", dict(type="proportional", rd=128, base=10000.0,
                                 factor=8.0, partial_rotary_factor=0.3), 16),
]

TRIG_POSITIONS = [0, 1, 7, 1000, 123457, 2**24 + 1]


def fmt(x):
    return repr(float(x))


def value_text(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, list):
        return ",".join(fmt(x) for x in v)
    if isinstance(v, int):
        return str(v)
    return fmt(v)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    lines = [
        "# Generated by tests/data/gen_rope_expected.py (torch float64); do not edit.",
        "# case <name> / rotary_dim / base / scaling <type> key=value... / seq_len /",
        "# attention_factor / inv_freq <values> / trig <position> <i> <cos*a> <sin*a> / end",
    ]
    for name, cfg, seq_len in CASES:
        inv, attention = COMPUTE[cfg["type"]](cfg, seq_len)
        fields = " ".join(f"{k}={value_text(cfg[k])}" for k in SCALING_KEYS if k in cfg)
        lines.append(f"case {name}")
        lines.append(f"rotary_dim {cfg['rd']}")
        lines.append(f"base {fmt(cfg['base'])}")
        lines.append(f"scaling {cfg['type']} {fields}".rstrip())
        lines.append(f"seq_len {seq_len}")
        lines.append(f"attention_factor {fmt(attention)}")
        lines.append("inv_freq " + " ".join(fmt(x) for x in inv.tolist()))
        half = cfg["rd"] // 2
        for p in TRIG_POSITIONS:
            for i in sorted({0, 1, half // 2, half - 1}):
                angle = torch.tensor(float(p), dtype=DT) * inv[i]
                c = torch.cos(angle).item() * attention
                s = torch.sin(angle).item() * attention
                lines.append(f"trig {p} {i} {fmt(c)} {fmt(s)}")
        lines.append("end")
    with open(os.path.join(here, "rope_expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
