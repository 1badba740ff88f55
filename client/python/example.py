#!/usr/bin/python3
"""Calls a running phasor-server from Python and checks what comes back.

    /usr/bin/python3 client/python/example.py [--target localhost:50051]

with the package installed (pip install --no-build-isolation ./client/python)
or built by CMake (target phasor_python, into build/python).

Asks for sinusoidal encodings, compares them with the formula computed here
in numpy, rotates a random query with RoPE, and prints ALiBi slopes. Debian's
numpy and grpcio live under /usr/bin/python3, not a venv's python3.
"""

import argparse
import importlib.util
import os
import sys

import numpy as np

# Running this file puts client/python first on sys.path, and its
# phasor_client sources have no stubs (they are generated at build time).
# Use the installed package, else the copy CMake's phasor_python target
# built in <repository>/build/python.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
if importlib.util.find_spec("phasor_client") is None:
    sys.path.insert(0, os.path.join(_HERE, "..", "..", "build", "python"))
from phasor_client import EncoderClient  # noqa: E402


def sinusoid(positions, dim, base=10000.0):
    """PE[t, 2k] = sin(t·ω_k), PE[t, 2k+1] = cos(t·ω_k), ω_k = base^(−2k/dim)
    (Vaswani et al. 2017, §3.5)."""
    omega = base ** (-2.0 * np.arange(dim // 2) / dim)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * omega
    pe = np.empty((len(positions), dim))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:50051")
    parser.add_argument("--tls_ca", help="CA bundle, for a TLS server")
    parser.add_argument("--token_file", help="bearer token, if required")
    args = parser.parse_args()

    with EncoderClient(args.target, tls_ca=args.tls_ca,
                       token_file=args.token_file) as client:
        print("health:", client.health())

        pe = client.encode_positions(count=8, dim=16)
        print(f"encode_positions: {pe.dtype} {pe.shape}")
        np.set_printoptions(precision=4, suppress=True, linewidth=120)
        print(pe[:4, :8])
        error = np.abs(pe - sinusoid(np.arange(8), 16)).max()
        print(f"max |server - numpy formula| = {error:.2e}")

        rng = np.random.default_rng(0)
        query = rng.standard_normal((6, 4, 32)).astype(np.float32)
        rotated, _, factor = client.apply_rope(query, rotary_dim=32)
        print(f"apply_rope: {rotated.shape} {rotated.dtype}, attention factor "
              f"{factor}; position 0 unchanged: "
              f"{np.allclose(rotated[0], query[0])}")

        slopes, _ = client.alibi(8)
        print("alibi slopes (8 heads):", slopes)
    return 0 if error < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
