"""Peer of bench/sinusoidal_bench.cc: the seed texts' PyTorch sinusoidal table.

The timed code is the classic PyTorch positional-encoding snippet the project
started from (float32 throughout, as written there):

    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float()
                         * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)

plus the same in numpy float32 and float64 (the float64 one rounded to float32
at the end, which is what an accuracy-minded numpy user would write).

--check DIR compares every variant and Phasor's dumped table against a
long-double (x87 80-bit) reference and prints the max absolute error of each.
"""
import math
import sys

import numpy as np
import torch

import common

SIZES = [(4096, 512), (65536, 1024)]


def seed_torch(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float()
                         * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def numpy_table(max_len, d_model, dtype):
    pe = np.empty((max_len, d_model), dtype=np.float32)
    position = np.arange(max_len, dtype=dtype)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2, dtype=dtype)
                      * dtype(-math.log(10000.0) / d_model))
    angle = position * div_term
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def check_rows(max_len):
    """Rows compared with the long-double reference: all of them up to 8192
    rows; for larger tables every 16th row plus the last 2048 (the largest
    angles, where float32 angle arithmetic is worst)."""
    if max_len <= 8192:
        return np.arange(max_len)
    return np.union1d(np.arange(0, max_len, 16), np.arange(max_len - 2048, max_len))


def reference(rows, d_model):
    """Long-double rows straight from the formula, ω_k = 10000^(−2k/d)."""
    k = np.arange(d_model // 2, dtype=np.longdouble)
    omega = np.power(np.longdouble(10000), -2 * k / np.longdouble(d_model))
    angle = rows.astype(np.longdouble)[:, None] * omega
    out = np.empty((len(rows), d_model), dtype=np.longdouble)
    out[:, 0::2] = np.sin(angle)
    out[:, 1::2] = np.cos(angle)
    return out


def max_error(table, rows, ref):
    return float(np.max(np.abs(table[rows].astype(np.longdouble) - ref)))


def check(directory, sizes):
    ok = True
    for n, d in sizes:
        rows = check_rows(n)
        ref = reference(rows, d)
        phasor = common.load_raw(directory, f"sinusoidal_N{n}_d{d}.bin", np.float32, (n, d))
        peer = seed_torch(n, d).numpy()
        errors = {
            "phasor": max_error(phasor, rows, ref),
            "torch_seed_f32": max_error(peer, rows, ref),
            "numpy_f32": max_error(numpy_table(n, d, np.float32), rows, ref),
            "numpy_f64": max_error(numpy_table(n, d, np.float64), rows, ref),
        }
        for name, err in errors.items():
            print(f"accuracy sinusoidal/N={n}/d={d} {name:15s} max|x - longdouble| = {err:.3e}",
                  file=sys.stderr)
            # Machine-readable line for bench/report.py.
            print(f"ACCURACY sinusoidal/N={n}/d={d}/impl={name} {err:.6e}")
        # Same numbers: the seed's float32 angle t·ω is off by up to about
        # t·2^-23 radians, so the two tables can differ by that much and no more.
        ok &= common.check_close(f"sinusoidal/N={n}/d={d} phasor vs torch_seed",
                                 phasor, peer, atol=4.0 * n * 2.0 ** -24)
        ok &= errors["phasor"] <= 2e-6
    return ok


def main():
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    sizes = SIZES[:1] if args.small else SIZES
    if args.check:
        sys.exit(0 if check(args.check, sizes) else 1)
    results = common.Results(args)
    for threads in common.thread_counts(args):
        torch.set_num_threads(threads)
        for n, d in sizes:
            tag = f"N={n}/d={d}/threads={threads}"
            results.add(f"sinusoidal/{tag}/impl=torch_seed", lambda: seed_torch(n, d))
            if threads == 1:  # numpy's ufuncs are single-threaded.
                results.add(f"sinusoidal/{tag}/impl=numpy_f32",
                            lambda: numpy_table(n, d, np.float32))
                results.add(f"sinusoidal/{tag}/impl=numpy_f64",
                            lambda: numpy_table(n, d, np.float64))
    results.write("sinusoidal")


if __name__ == "__main__":
    main()
