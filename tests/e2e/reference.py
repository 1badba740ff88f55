"""Expected values for the end-to-end tests, computed here in float64 numpy
from the published formulas (sinusoidal ω_k = base^(−2k/d), RoPE
θ_i = base^(−2i/rd) with HALF or INTERLEAVED pairs, ALiBi slopes; the proto's
comments state them), independent of the server's C++ code."""

import math

import numpy as np


def sinusoid(positions, dim, base=10000.0, layout="interleaved"):
    """PE[t, 2k] = sin(t·ω_k), PE[t, 2k+1] = cos(t·ω_k), ω_k = base^(−2k/dim)
    (Vaswani et al. 2017 §3.5); SPLIT_SIN_COS puts all sin columns first."""
    omega = base ** (-2.0 * np.arange(dim // 2) / dim)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * omega
    pe = np.empty((angles.shape[0], dim))
    if layout == "interleaved":
        pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    elif layout == "split_sin_cos":
        pe[:, :dim // 2], pe[:, dim // 2:] = np.sin(angles), np.cos(angles)
    else:
        raise ValueError(layout)
    return pe


def rope_inv_freq(rotary_dim, base=10000.0):
    """θ_i = base^(−2i/rotary_dim) (Su et al., RoFormer)."""
    return base ** (-2.0 * np.arange(rotary_dim // 2) / rotary_dim)


def rope_half(x, positions, rotary_dim, base=10000.0):
    """RoPE with HALF pairing (i, i + rd/2), HF LLaMA's rotate_half; channels
    >= rotary_dim pass through. x is [T, H, D]."""
    x = np.asarray(x, dtype=np.float64)
    half = rotary_dim // 2
    angles = np.asarray(positions, dtype=np.float64)[:, None] * \
        rope_inv_freq(rotary_dim, base)
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    out = x.copy()
    first, second = x[..., :half], x[..., half:rotary_dim]
    out[..., :half] = first * cos - second * sin
    out[..., half:rotary_dim] = second * cos + first * sin
    return out


def alibi_slopes(num_heads):
    """Press et al. 2022: 2^(−8(h+1)/n) for n a power of two; otherwise the
    slopes of the nearest lower power of two followed by every other slope
    of twice that power."""
    def power_of_two(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    closest = 2 ** int(math.floor(math.log2(num_heads)))
    if closest == num_heads:
        return np.array(power_of_two(num_heads))
    extra = power_of_two(2 * closest)[0::2][:num_heads - closest]
    return np.array(power_of_two(closest) + extra)


def alibi_bias(num_heads, q_len, k_len, causal):
    """bias[h, i, j] = −m_h·|p_i − j|, p_i = k_len − q_len + i; −inf for
    j > p_i when causal."""
    slopes = alibi_slopes(num_heads)
    query_positions = k_len - q_len + np.arange(q_len)
    distance = query_positions[:, None] - np.arange(k_len)[None, :]
    bias = -slopes[:, None, None] * np.abs(distance)[None]
    if causal:
        bias = np.where(distance[None] < 0, -np.inf, bias)
    return bias


def time_ladder(tau_seconds, dim, min_period, max_period):
    """[sin(2πτ/P_k), cos(2πτ/P_k)] interleaved, P_k geometric from
    min_period to max_period over K = dim/2 periods."""
    count = dim // 2
    k = np.arange(count)
    periods = min_period * (max_period / min_period) ** (k / (count - 1))
    angles = 2 * np.pi * np.asarray(tau_seconds, dtype=np.float64)[:, None] \
        / periods
    out = np.empty((angles.shape[0], dim))
    out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
    return out


def channel_deltas(timestamps_ns, observed):
    """GRU-D δ (first observation policy ZERO), seconds: time since the
    channel's last observation strictly before each row."""
    rows, channels = observed.shape
    out = np.zeros((rows, channels))
    for c in range(channels):
        for r in range(rows):
            before = [timestamps_ns[s] for s in range(rows)
                      if observed[s, c] and timestamps_ns[s] < timestamps_ns[r]]
            if before:
                out[r, c] = (timestamps_ns[r] - max(before)) / 1e9
    return out


def describe(frequencies, num_offsets):
    """Wavelengths, unambiguous range and nearest-code distance/offset of a
    ladder of (sin ω_j x, cos ω_j x) pairs."""
    frequencies = np.asarray(frequencies, dtype=np.float64)
    wavelengths = 2 * np.pi / frequencies
    k = np.arange(1, num_offsets)
    distances = np.sqrt((2 - 2 * np.cos(np.outer(k, frequencies))).sum(axis=1))
    best = int(np.argmin(distances))
    similarity = np.cos(np.outer(np.arange(num_offsets), frequencies)).sum(1)
    return wavelengths, wavelengths.max(), distances[best], best + 1, similarity
