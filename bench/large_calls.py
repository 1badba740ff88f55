"""Large calls from Python under different gRPC channel options.

Drives a running phasor-server (started with --enable_echo and
--max_message_bytes of at least twice the payload plus 1 MiB) with Echo of S bytes and ApplyRope of a float32
query [S/1024, 2, 128] (S up, S down, as bench/phasor_load.cc) through the
Python package's EncoderClient, once per channel-option variant; the variants
take turns call by call, so a shared machine's drift reaches each alike.
Prints the p50 and range of each (variant, method) and, with --json, writes
them.

    /usr/bin/python3 bench/large_calls.py --target 127.0.0.1:PORT \\
        [--payload_mib 64] [--calls 7] [--variants default,window,...] \
        [--python_dir BUILD/python]

Variants (channel arguments on top of the client's message limits):
    default   what EncoderClient sets when given no channel_options (the
              message limits only: gRPC's defaults otherwise)
    nobdp     grpc.http2.bdp_probe=0 (fixed windows)
    window    grpc.http2.lookahead_bytes = 64 MiB (initial stream window)
    chunks    TCP reads of 1 to 16 MiB at a time
              (grpc.experimental.tcp_{min_,max_,}read_chunk_size)
    frames    grpc.http2.max_frame_size = 16 MiB - 1
    all       window + chunks + frames
    copied    default, but every reply parsed whole by protobuf and its
              tensors copied out, as before phasor_client/_wire.py (which
              leaves large reply tensors in the received bytes)
    whole     default, but ApplyRope as one call however large (the cap of
              2 MiB per call, phasor_client/_panel.py PIECE_BYTES, lifted):
              the client before that cap; Echo is one call in every variant
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

MIB = 1 << 20

# Channel arguments per variant (on top of the message limits).
CHUNKS = [("grpc.experimental.tcp_read_chunk_size", 4 * MIB),
          ("grpc.experimental.tcp_min_read_chunk_size", 1 * MIB),
          ("grpc.experimental.tcp_max_read_chunk_size", 16 * MIB)]
WINDOW = [("grpc.http2.lookahead_bytes", 64 * MIB)]
FRAMES = [("grpc.http2.max_frame_size", 16 * MIB - 1)]
VARIANTS = {
    "default": [],
    "nobdp": [("grpc.http2.bdp_probe", 0)],
    "window": WINDOW,
    "chunks": CHUNKS,
    "frames": FRAMES,
    "all": WINDOW + CHUNKS + FRAMES,
    "copied": [],
    "whole": [],
}


def make_client(phasor_client, target, variant, limit):
    return phasor_client.EncoderClient(target, max_message_bytes=limit,
                                       deadline_seconds=120,
                                       channel_options=VARIANTS[variant])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--payload_mib", type=int, default=64)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--methods", default="echo,apply_rope")
    parser.add_argument("--json", default="")
    parser.add_argument("--python_dir", default="build/python",
                        help="the built package (client/CMakeLists.txt phasor_python)")
    args = parser.parse_args()
    sys.path.insert(0, args.python_dir)
    import phasor_client  # noqa: E402  (after the path is set)

    payload = args.payload_mib * MIB
    # EncoderClient.apply_rope splits tensors over half the limit (and over
    # PIECE_BYTES but in "whole"): twice the payload (and room for the
    # framing) leaves that to the cap alone.
    limit = 2 * payload + MIB
    variants = args.variants.split(",")
    methods = args.methods.split(",")
    clients = {v: make_client(phasor_client, args.target, v, limit) for v in variants}
    echo_bytes = np.arange(payload // 4, dtype=np.float32).tobytes()
    query = np.linspace(-1, 1, payload // 4, dtype=np.float32).reshape(-1, 2, 128)
    positions = np.arange(query.shape[0], dtype=np.int64)

    def call(client, method):
        if method == "echo":
            out = client.echo(echo_bytes)
            assert len(out) == payload
        else:
            out = client.apply_rope(query, positions=positions)
            assert out.query.nbytes == payload
    detach_bytes = phasor_client._wire.DETACH_BYTES
    piece_bytes = phasor_client._panel.PIECE_BYTES

    def set_variant(variant):
        # "copied": no reply is large enough to detach.
        phasor_client._wire.DETACH_BYTES = (
            1 << 62 if variant == "copied" else detach_bytes)
        # "whole": no cap on one call but the limit.
        phasor_client._panel.PIECE_BYTES = (
            1 << 62 if variant == "whole" else piece_bytes)

    times = {(v, m): [] for v in variants for m in methods}
    for v in variants:  # Warm-up: connect, first large buffers.
        set_variant(v)
        for m in methods:
            call(clients[v], m)
    for _ in range(args.calls):
        for v in variants:
            set_variant(v)
            for m in methods:
                start = time.perf_counter()
                call(clients[v], m)
                times[(v, m)].append(time.perf_counter() - start)
    rows = []
    for (v, m), values in times.items():
        p50 = statistics.median(values)
        rows.append({"variant": v, "method": m, "payload": payload, "p50_s": p50,
                     "min_s": min(values), "max_s": max(values), "calls": len(values)})
        print(f"{m:>10} {args.payload_mib} MiB  {v:>8}: p50 {p50 * 1e3:8.1f} ms  "
              f"range {min(values) * 1e3:.1f}-{max(values) * 1e3:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
