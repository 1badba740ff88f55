"""Workload P, a panel of many short series, three ways: pandas, one Phasor
encode_panel call, and one Phasor encode_observations call per series.

Workload P (shared with the C++ benchmarks): S = 10000 series of R = 100
rows, C = 3 channels, wide, float64 values. With h(k) = (k·2654435761) mod
2^32 and k = s·R + i (series s, row i):
  t = 1704067200·10^9 + s·7919·10^9 + i·3600·10^9 + (h(k) mod 3600000)·10^6 ns
  value[c] = NaN if h(3k + c + 1) mod 10 < 3 else sin(0.001·k + c)
and the spec
  temporal { time { dim: 8 } gaps { include_mask: true }
             calendar { time_zone: "America/New_York"
                        fields: [HOUR_OF_DAY, DAY_OF_WEEK, MONTH_OF_YEAR] } }
gives F = 21 float32 columns, Phasor's column order:
  time      sin, cos of 2π·τ/P_k for P_k = 1 s · 315569520^(k/3), k = 0..3,
            τ = seconds since the series' first row (core/continuous_time.h)
  gaps      Δt since the previous row (0 first), δ per channel = time since
            the channel's last observation strictly before the row (0 before
            any), then the 3 observed-mask columns (core/gaps.h)
  calendar  sin, cos of 2π·x/P for hour (P 24), day of week (Monday = 0, P 7),
            month − 1 (P 12) in New York time (core/calendar.h)

The pandas side is what a pandas user writes: one DataFrame (series id, time,
three channels), groupby().diff() for Δt, groupby().shift() + ffill of each
channel's observation times for δ, groupby().transform("first") for τ,
tz_convert + dt accessors for the calendar. Timed from the DataFrame to the
float32 [T, 21] array. Phasor is timed from the numpy arrays to the same
array, through a phasor-server this script starts on a free loopback port
(and stops by its pid). Each figure is the best of --repetitions runs.
--pandas_only times pandas alone (the peer of bench/panel_bench's core
figure, which bench/run.sh takes side by side).

Prints JSON: Google Benchmark-shaped rows (common.Results) plus the ratios
panel_vs_single_calls (single-call time / panel time) and phasor_vs_pandas
(pandas time / panel time), the largest |Phasor − pandas| difference, and
the client's CPU time and minor page faults per panel call
(client_per_call).
Two variants of the panel call run after it, each as the client was before
a change: replies parsed whole by protobuf (replies_copied_vs_detached) and
requests and replies of up to 32 MiB instead of 2 MiB
(32mib_pieces_vs_2mib).

  /usr/bin/python3 bench/peers/panel_peer.py --server build/server/phasor-server
"""
import argparse
import collections
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

import common

# The package CMake's phasor_python target builds (stubs generated at build
# time), unless PYTHONPATH or an install provides it.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "..", "build", "python"))
try:
    from phasor_client import EncoderClient  # noqa: E402
    from phasor_client import _panel as phasor_panel  # noqa: E402
    from phasor_client import _wire as phasor_wire  # noqa: E402
except ImportError:  # --pandas_only needs no client; main() says so otherwise.
    EncoderClient = None

NUM_CHANNELS = 3
ROWS_PER_SERIES = 100
START_NS = 1704067200 * 10**9
ZONE = "America/New_York"
SPEC = ('temporal { time { dim: 8 } gaps { include_mask: true } '
        'calendar { time_zone: "America/New_York" '
        'fields: [HOUR_OF_DAY, DAY_OF_WEEK, MONTH_OF_YEAR] } }')
# core/continuous_time.h's default ladder: 1 s to 10 Gregorian years.
MIN_PERIOD_SECONDS = 1.0
MAX_PERIOD_SECONDS = 315569520.0
TIME_DIM = 8
# float32 outputs of angles formed two ways (Phasor: exact integer phase;
# pandas: float64 seconds) agree to a few float32 ulps.
TOLERANCE = 2e-5
STARTUP_TIMEOUT_S = 30.0


def hash32(k):
    return (k * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)


def workload(num_series):
    """Timestamps [T] int64 ns, values [T, 3] float64, offsets [S+1]."""
    rows = num_series * ROWS_PER_SERIES
    k = np.arange(rows, dtype=np.uint64)
    series = (k // np.uint64(ROWS_PER_SERIES)).astype(np.int64)
    row = (k % np.uint64(ROWS_PER_SERIES)).astype(np.int64)
    timestamps = (np.int64(START_NS) + series * np.int64(7919 * 10**9)
                  + row * np.int64(3600 * 10**9)
                  + (hash32(k) % np.uint64(3600000)).astype(np.int64)
                  * np.int64(10**6))
    values = np.empty((rows, NUM_CHANNELS))
    for c in range(NUM_CHANNELS):
        missing = hash32(np.uint64(3) * k + np.uint64(c + 1)) % np.uint64(10) < 3
        values[:, c] = np.where(missing, np.nan,
                                np.sin(0.001 * k.astype(np.float64) + c))
    offsets = np.arange(0, rows + 1, ROWS_PER_SERIES, dtype=np.int64)
    return timestamps, values, offsets


def dataframe(timestamps, values, offsets):
    series = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    frame = pd.DataFrame({"series": series,
                          "time": pd.to_datetime(timestamps, utc=True)})
    for c in range(NUM_CHANNELS):
        frame[f"x{c}"] = values[:, c]
    return frame


def pandas_features(frame):
    """The 21 columns from the DataFrame, the pandas way."""
    groups = frame.groupby("series", sort=False)
    seconds = frame["time"].astype("int64") / 1e9
    columns = []
    # time: τ from each series' first row, geometric ladder of 4 periods.
    tau = seconds - groups["time"].transform("first").astype("int64") / 1e9
    num_periods = TIME_DIM // 2
    for k in range(num_periods):
        period = (MAX_PERIOD_SECONDS if k == num_periods - 1 else
                  MIN_PERIOD_SECONDS * (MAX_PERIOD_SECONDS / MIN_PERIOD_SECONDS)
                  ** (k / (num_periods - 1)))
        angle = (2 * math.pi / period) * tau
        columns += [np.sin(angle), np.cos(angle)]
    # gaps: Δt, δ per channel, mask.
    columns.append(groups["time"].diff().dt.total_seconds().fillna(0.0))
    observed = {}
    for c in range(NUM_CHANNELS):
        name = f"x{c}"
        observed[name] = frame[name].notna()
        seen = frame["time"].where(observed[name])
        last_seen = seen.groupby(frame["series"], sort=False).shift(1)
        last_seen = last_seen.groupby(frame["series"], sort=False).ffill()
        columns.append((frame["time"] - last_seen).dt.total_seconds()
                       .fillna(0.0))
    columns += [observed[f"x{c}"].astype(np.float64)
                for c in range(NUM_CHANNELS)]
    # calendar in New York time.
    local = frame["time"].dt.tz_convert(ZONE)
    for x, period in ((local.dt.hour, 24), (local.dt.dayofweek, 7),
                      (local.dt.month - 1, 12)):
        angle = (2 * math.pi / period) * x
        columns += [np.sin(angle), np.cos(angle)]
    return np.stack([np.asarray(column, dtype=np.float64)
                     for column in columns], axis=1).astype(np.float32)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """phasor-server on a free loopback port, stopped by its pid."""

    def __init__(self, binary, flags):
        self.port = free_port()
        self.log = tempfile.TemporaryFile(mode="w+")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PHASOR_")}
        self.process = subprocess.Popen(
            [binary, f"--grpc_address=127.0.0.1:{self.port}",
             "--metrics_address=", *flags],
            stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env)
        self.target = f"127.0.0.1:{self.port}"
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        with EncoderClient(self.target, deadline_seconds=2) as client:
            while True:
                if self.process.poll() is not None:
                    self.log.seek(0)
                    raise RuntimeError("phasor-server exited:\n" +
                                       self.log.read())
                try:
                    if client.health() == "SERVING":
                        return
                except Exception:  # Not listening yet.
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("phasor-server not SERVING")
                time.sleep(0.05)

    def stop(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


class ClientCost:
    """This process's CPU seconds (every thread: gRPC's too) and minor page
    faults, summed over the calls measured under one name."""

    def __init__(self):
        self.calls = collections.Counter()
        self.cpu = collections.Counter()
        self.faults = collections.Counter()

    def measure(self, name, fn):
        before = resource.getrusage(resource.RUSAGE_SELF)
        result = fn()
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.calls[name] += 1
        self.cpu[name] += (after.ru_utime + after.ru_stime
                           - before.ru_utime - before.ru_stime)
        self.faults[name] += after.ru_minflt - before.ru_minflt
        return result

    def per_call(self):
        return {name: {"cpu_ms": 1e3 * self.cpu[name] / calls,
                       "minor_faults": self.faults[name] // calls}
                for name, calls in self.calls.items()}


def best_of(fn, repetitions, cost=None, name=None):
    """(best seconds, last result) over `repetitions` runs; each run's CPU
    and page faults go to `cost` under `name` when given."""
    best, result = float("inf"), None
    for _ in range(repetitions):
        start = time.perf_counter()
        result = cost.measure(name, fn) if cost else fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def single_calls(client, timestamps, values, offsets):
    features = np.empty((len(timestamps), 21), dtype=np.float32)
    for s in range(len(offsets) - 1):
        begin, end = offsets[s], offsets[s + 1]
        features[begin:end] = client.encode_observations(
            timestamps[begin:end], values[begin:end], spec=SPEC).features
    return features


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server",
                        help="path of the phasor-server binary")
    parser.add_argument("--pandas_only", action="store_true",
                        help="time pandas alone (no server, no client): the "
                             "peer of bench/panel_bench's core figure")
    parser.add_argument("--server_flag", action="append", default=[],
                        help="extra phasor-server flag (repeatable)")
    parser.add_argument("--series", type=int, default=10000,
                        help="S (workload P has 10000)")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--out", help="write the JSON here, not stdout")
    args = parser.parse_args()
    if not args.pandas_only and not args.server:
        parser.error("--server is required unless --pandas_only")
    if not args.pandas_only and EncoderClient is None:
        sys.exit("phasor_client is not importable: build the phasor_python "
                 "target or set PYTHONPATH")

    timestamps, values, offsets = workload(args.series)
    frame = dataframe(timestamps, values, offsets)
    pandas_seconds, expected = best_of(lambda: pandas_features(frame),
                                       args.repetitions)
    print(f"pandas                 {pandas_seconds * 1e3:10.1f} ms",
          file=sys.stderr, flush=True)
    name = f"panel/S={args.series}/R={ROWS_PER_SERIES}/C={NUM_CHANNELS}"
    if args.pandas_only:
        results = common.Results(argparse.Namespace(out=args.out))
        results.rows.append({"name": f"{name}/impl=pandas", "run_type": "aggregate",
                             "aggregate_name": "min",
                             "real_time": pandas_seconds * 1e9, "time_unit": "ns",
                             "repetitions": args.repetitions})
        results.write("panel")
        return

    server = Server(args.server, args.server_flag)
    try:
        with EncoderClient(server.target, deadline_seconds=120) as client:
            def panel():
                return client.encode_panel(timestamps, values,
                                           series_offsets=offsets, spec=SPEC)

            def lifted(module, name):
                """panel() with module.name beyond any message's size."""
                def run():
                    saved = getattr(module, name)
                    setattr(module, name, 1 << 62)
                    try:
                        return panel()
                    finally:
                        setattr(module, name, saved)
                return run

            # Replies parsed whole by protobuf, their tensors copied out:
            # the client before phasor_client/_wire.py.
            panel_copied = lifted(phasor_wire, "DETACH_BYTES")
            # Requests and replies of up to half the message limit (32 MiB):
            # the client before phasor_client/_panel.py's PIECE_BYTES.
            panel_large_pieces = lifted(phasor_panel, "PIECE_BYTES")

            result = panel()  # Warm-up: connection, the probe for F.
            # One variant after the other, the shipped client first: the
            # others' large allocations leave glibc's heap in another state
            # (its mmap threshold raised, freed blocks of other sizes), which
            # slows whatever runs after them in this process.
            cost = ClientCost()
            panel_seconds, result = best_of(panel, args.repetitions, cost,
                                            "phasor_panel")
            copied_seconds, copied = best_of(panel_copied, args.repetitions,
                                             cost,
                                             "phasor_panel_replies_copied")
            large_seconds, large = best_of(panel_large_pieces,
                                           args.repetitions, cost,
                                           "phasor_panel_32mib_pieces")
            if copied.features.tobytes() != result.features.tobytes():
                sys.exit("panel: copied and detached replies differ")
            if large.features.tobytes() != result.features.tobytes():
                sys.exit("panel: 2 MiB and 32 MiB pieces differ")
            print(f"phasor encode_panel    {panel_seconds * 1e3:10.1f} ms"
                  f"  (replies copied: {copied_seconds * 1e3:.1f} ms,"
                  f" 32 MiB pieces: {large_seconds * 1e3:.1f} ms)",
                  file=sys.stderr, flush=True)
            single_seconds, singles = best_of(
                lambda: single_calls(client, timestamps, values, offsets),
                args.repetitions)
            print(f"phasor {args.series} calls  {single_seconds * 1e3:10.1f} ms",
                  file=sys.stderr, flush=True)
    finally:
        server.stop()

    features = result.features
    if features.shape != expected.shape:
        sys.exit(f"shape: phasor {features.shape}, pandas {expected.shape}")
    panel_equals_calls = features.tobytes() == singles.tobytes()
    difference = np.abs(features.astype(np.float64) - expected)
    worst = np.unravel_index(np.argmax(difference), difference.shape)
    agree = common.check_close("workload P phasor vs pandas", features,
                               expected, TOLERANCE)

    run = argparse.Namespace(out=args.out)
    results = common.Results(run)
    for impl, seconds in (("pandas", pandas_seconds),
                          ("phasor_panel", panel_seconds),
                          ("phasor_panel_replies_copied", copied_seconds),
                          ("phasor_panel_32mib_pieces", large_seconds),
                          ("phasor_single_calls", single_seconds)):
        results.rows.append({"name": f"{name}/impl={impl}",
                             "run_type": "aggregate", "aggregate_name": "min",
                             "real_time": seconds * 1e9, "time_unit": "ns",
                             "repetitions": args.repetitions})
    results.write("panel", extra={
        "ratios": {
            "panel_vs_single_calls": single_seconds / panel_seconds,
            "phasor_vs_pandas": pandas_seconds / panel_seconds,
            "replies_copied_vs_detached": copied_seconds / panel_seconds,
            "32mib_pieces_vs_2mib": large_seconds / panel_seconds,
        },
        "client_per_call": cost.per_call(),
        "check": {
            "max_abs_difference": float(difference.max()),
            "worst_cell": [int(i) for i in worst],
            "tolerance": TOLERANCE,
            "allclose": bool(agree),
            "panel_equals_single_calls_bytewise": bool(panel_equals_calls),
        },
    })
    sys.exit(0 if agree and panel_equals_calls else 1)


if __name__ == "__main__":
    main()
