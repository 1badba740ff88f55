"""Shared helpers for the Python peers of bench/*_bench.cc.

Inputs are the same deterministic function of the element index as in
bench/bench_common.h:
    value(i) = float32(((i * 2654435761) mod 2**32) / 2**32 * 2 - 1)
so both sides time (and the check step compares) identical numbers.

Timing follows Google Benchmark's shape: each repetition runs the callable
until `min_time` seconds have passed (at least once) and records the mean time
per call; the reported figure is the median over repetitions. Results print
as Google Benchmark JSON ({"benchmarks": [{"name", "real_time", "time_unit"}]})
so bench/report.py reads both sides the same way.
"""
import argparse
import json
import os
import platform
import re
import statistics
import sys
import time

import numpy as np


def input_values(n):
    """float32 values on [-1, 1), identical to phasor::bench::InputValue."""
    i = np.arange(n, dtype=np.uint64)
    hashed = (i * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return (hashed.astype(np.float64) / 4294967296.0 * 2.0 - 1.0).astype(np.float32)


def measure(fn, min_time, repetitions, max_seconds):
    start = time.perf_counter()
    fn()  # Warm-up: first-call allocations and lazy initialisation.
    first = time.perf_counter() - start
    # Slow calls (seconds each) get fewer repetitions, so one benchmark stays
    # within about max_seconds.
    repetitions = max(1, min(repetitions, int(max_seconds / max(first, min_time))))
    means = []
    for _ in range(repetitions):
        calls = 0
        start = time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        means.append(elapsed / calls)
    return statistics.median(means), calls


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--threads", default="1,2",
                   help="comma-separated thread counts (torch.set_num_threads)")
    p.add_argument("--min_time", type=float, default=0.2,
                   help="seconds per repetition")
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--max_seconds", type=float, default=6.0,
                   help="time budget per benchmark; slow calls get fewer repetitions")
    p.add_argument("--small", action="store_true",
                   help="only the small sizes (quick check)")
    p.add_argument("--check", metavar="DIR",
                   help="compare with Phasor's outputs dumped in DIR "
                        "(bench program --phasor_dump=DIR) and exit")
    p.add_argument("--out", help="write the JSON here instead of stdout")
    p.add_argument("--filter", default="", help="regular expression a name must match")
    return p


class Results:
    def __init__(self, args):
        self.args = args
        self.rows = []

    def add(self, name, fn):
        if self.args.filter and not re.search(self.args.filter, name):
            return
        seconds, calls = measure(fn, self.args.min_time, self.args.repetitions,
                                 self.args.max_seconds)
        self.rows.append({"name": name, "run_type": "aggregate",
                          "aggregate_name": "median", "real_time": seconds * 1e9,
                          "time_unit": "ns", "iterations": calls})
        print(f"{name:70s} {seconds * 1e3:12.3f} ms", file=sys.stderr, flush=True)

    def write(self, peer, extra=None):
        """Prints (or writes to --out) the rows and the context; `extra`
        adds top-level keys (a peer's ratios or checks)."""
        context = {"peer": peer, "python": platform.python_version(),
                   "host": platform.node(), "num_cpus": os.cpu_count(),
                   # bench/run.sh sets these for the "allocator warm" runs.
                   "malloc_env": {k: v for k, v in os.environ.items()
                                  if k.startswith("MALLOC_")}}
        try:
            import torch
            context["torch"] = torch.__version__
        except ImportError:
            pass
        try:
            import pandas
            context["pandas"] = pandas.__version__
        except ImportError:
            pass
        context["numpy"] = np.__version__
        document = {"context": context, "benchmarks": self.rows}
        document.update(extra or {})
        text = json.dumps(document, indent=1)
        if self.args.out:
            with open(self.args.out, "w") as f:
                f.write(text + "\n")
        else:
            print(text)


def thread_counts(args):
    return [int(t) for t in args.threads.split(",")]


def load_raw(directory, name, dtype, shape):
    path = os.path.join(directory, name)
    data = np.fromfile(path, dtype=dtype)
    return data.reshape(shape)


def check_close(label, ours, theirs, atol):
    """Prints the max |difference| and fails the check if it exceeds atol."""
    diff = float(np.max(np.abs(ours.astype(np.float64) - theirs.astype(np.float64))))
    ok = diff <= atol
    print(f"check {label:55s} max|phasor-peer| = {diff:.3e} "
          f"(tolerance {atol:.1e}) {'ok' if ok else 'MISMATCH'}", file=sys.stderr)
    return ok
