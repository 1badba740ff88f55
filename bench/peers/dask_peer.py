"""Workload P at 10^7 rows three ways: pandas, one EncoderClient.encode_frame
in one process, and phasor_client.dask.encode_frame on a dask.distributed
LocalCluster (--workers processes of --threads threads), all on this host's
cores, against --servers phasor-servers this script starts on loopback.

Workload P is panel_peer.py's (its docstring gives the formula and the
spec, F = 21 float32 columns), with S = 100000 series of R = 100 rows by
default: 10^7 rows, as a DataFrame with columns series, time (UTC-aware),
x0, x1, x2 and a RangeIndex.

  pandas        panel_peer.pandas_features on the whole frame (one run)
  single        EncoderClient.encode_frame of the whole frame, from the
                DataFrame in memory to the features DataFrame, through one
                round_robin channel over the same servers as Dask
  dask/series   the frame as partitions of whole series (P partitions of
                S/P series), made on the workers and persisted there first
                (as read_parquet would leave them), then encode_frame(...,
                partitioned_by="series").persist(): features left on the
                workers, as to_parquet would consume them
  dask/time     the same rows partitioned by time: partition q holds rows
                [qR/P, (q+1)R/P) of every series, so each series spans all
                P partitions and its SeriesState flows through the lanes
  +gather       the dask/series result brought to this process as one
                DataFrame (.compute()): adds the transfer and the concat
  malloc=       the workers' malloc settings (WORKER_MALLOC): dask's
                default, or this process's (glibc's defaults unless MALLOC_*
                variables are set)

Each Dask result is checked bytewise against the single call's. Where the
time goes: CPU seconds of this process (the client; for Dask, the
scheduler), of the worker processes and of the servers, over each timed run,
next to its wall time (2 cores: CPU seconds / wall ≤ 2).

Prints JSON (common.Results rows, real_time = best of --repetitions, plus
rows_per_second and cpu_seconds per variant, and the ratio
dask_vs_single = single seconds / dask seconds). On a shared host the
--pairs rounds are the figure to read: the single call and dask/series
(first partition count) take turns, and each round's ratio compares two
runs a few seconds apart.

  /usr/bin/python3 bench/peers/dask_peer.py --server build/server/phasor-server
"""
import argparse
import os
import resource
import sys
import tempfile
import time

import numpy as np
import pandas as pd

import common
import panel_peer
from panel_peer import (NUM_CHANNELS, ROWS_PER_SERIES, SPEC, START_NS,
                        hash32)

# The workers import this directory (panel_peer, common) and the package
# CMake's phasor_python target builds, as this process does.
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "build", "python")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [HERE, PYTHON_DIR] + [p for p in os.environ.get("PYTHONPATH", "")
                          .split(os.pathsep) if p])
sys.path.append(PYTHON_DIR)

import dask  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from distributed import Client, LocalCluster, wait  # noqa: E402

from phasor_client import EncoderClient  # noqa: E402
from phasor_client import dask as phasor_dask  # noqa: E402

FRAME_ARGS = dict(series_column="series", time_column="time", spec=SPEC)


def rows_of(first_series, num_series, first_row, num_rows):
    """Workload P's rows i in [first_row, first_row + num_rows) of series
    [first_series, first_series + num_series), series-major: the same
    values as panel_peer.workload at those (s, i)."""
    series = np.repeat(np.arange(first_series, first_series + num_series,
                                 dtype=np.int64), num_rows)
    row = np.tile(np.arange(first_row, first_row + num_rows,
                            dtype=np.int64), num_series)
    k = (series * ROWS_PER_SERIES + row).astype(np.uint64)
    timestamps = (np.int64(START_NS) + series * np.int64(7919 * 10**9)
                  + row * np.int64(3600 * 10**9)
                  + (hash32(k) % np.uint64(3600000)).astype(np.int64)
                  * np.int64(10**6))
    frame = pd.DataFrame({"series": series,
                          "time": pd.to_datetime(timestamps, utc=True)})
    for c in range(NUM_CHANNELS):
        missing = hash32(np.uint64(3) * k + np.uint64(c + 1)) % np.uint64(10) < 3
        frame[f"x{c}"] = np.where(missing, np.nan,
                                  np.sin(0.001 * k.astype(np.float64) + c))
    return frame


def series_partition(bounds):
    """Partition of whole series: (first series, count)."""
    first, count = bounds
    part = rows_of(first, count, 0, ROWS_PER_SERIES)
    part.index = pd.RangeIndex(first * ROWS_PER_SERIES,
                               (first + count) * ROWS_PER_SERIES)
    return part


def time_partition(bounds):
    """Partition of rows [first_row, first_row + count) of every series,
    indexed by the row's position in the series-major frame."""
    num_series, first_row, count = bounds
    part = rows_of(0, num_series, first_row, count)
    series = part["series"].to_numpy()
    part.index = pd.Index(series * ROWS_PER_SERIES + np.tile(
        np.arange(first_row, first_row + count), num_series))
    return part


def cpu_seconds_of_pid(pid):
    """utime + stime of a process, from /proc (clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU seconds of this process, the Dask workers and the servers over a
    run."""

    def __init__(self, servers, dask_client=None):
        self.servers = servers
        self.dask_client = dask_client

    def sample(self):
        workers = (sum(self.dask_client.run(own_cpu_seconds).values())
                   if self.dask_client else 0.0)
        return {"client": own_cpu_seconds(), "workers": workers,
                "servers": sum(cpu_seconds_of_pid(s.process.pid)
                               for s in self.servers)}

    def measure(self, fn):
        before = self.sample()
        start = time.perf_counter()
        result = fn()
        wall = time.perf_counter() - start
        after = self.sample()
        cpu = {name: after[name] - before[name] for name in before}
        return wall, cpu, result


def best(meter, fn, repetitions):
    """(best wall seconds, its CPU seconds, last result)."""
    best_run = None
    for _ in range(repetitions):
        wall, cpu, result = meter.measure(fn)
        if best_run is None or wall < best_run[0]:
            best_run = (wall, cpu)
        del result
    wall, cpu = best_run
    return wall, cpu


# The worker processes' malloc settings (dask's nanny sets them before a
# worker starts): "dask" keeps dask.distributed's default, which sets
# MALLOC_TRIM_THRESHOLD_=65536 so that freed memory goes back to the system
# at once (and glibc's mmap threshold stops adapting, so every array above
# 128 KiB is a fresh mmap, its pages faulted in again by each task);
# "inherit" gives the workers this process's settings, as the single call
# has them: glibc's defaults, or MALLOC_* from the environment (run.sh's
# "allocator warm").
WORKER_MALLOC = {"dask": None, "inherit": {}}


def run_pairs(args, meter, targets, frame, run_series):
    """--pairs rounds of the single call and dask/series, taking turns
    (ABBA), so that both sides of each ratio see the same load on a shared
    host: [{"single": (wall, cpu), "dask": (wall, cpu)}]."""
    rounds = []
    with EncoderClient("ipv4:" + ",".join(targets),
                       load_balancing_policy="round_robin",
                       deadline_seconds=600) as client:
        client.encode_frame(frame.iloc[:1000], **FRAME_ARGS)  # Warm-up.
        calls = {"single": lambda: client.encode_frame(frame, **FRAME_ARGS),
                 "dask": run_series}
        for index in range(args.pairs):
            measured = {}
            for side in (("single", "dask") if index % 2 == 0 else
                         ("dask", "single")):
                wall, cpu, result = meter.measure(calls[side])
                del result
                measured[side] = (wall, cpu)
            rounds.append(measured)
            print(f"pair {index}: single {measured['single'][0]:.2f} s, "
                  f"dask {measured['dask'][0]:.2f} s: "
                  f"{measured['single'][0] / measured['dask'][0]:.2f}x",
                  file=sys.stderr, flush=True)
    return rounds


def run_dask(args, environ, servers, targets, frame, rows, reference_bytes,
             reference_index, counts, workspace, record, paired):
    """The dask/* variants on a LocalCluster whose workers have the malloc
    settings `environ` (a WORKER_MALLOC key); the --pairs rounds go to
    paired[environ]."""
    settings = {}
    if WORKER_MALLOC[environ] is not None:
        settings["distributed.nanny.pre-spawn-environ"] = \
            WORKER_MALLOC[environ]
    with dask.config.set(settings), LocalCluster(
            n_workers=args.workers, threads_per_worker=args.threads,
            processes=True, host="127.0.0.1", dashboard_address=None,
            local_directory=workspace, silence_logs=40,
            memory_limit=0) as cluster, Client(cluster) as dask_client:
        meter = CpuMeter(servers, dask_client)
        options = {"deadline_seconds": 600}

        def check(result, label):
            got = result.compute()
            if not (got.index.equals(reference_index) and
                    got.to_numpy().tobytes() == reference_bytes):
                sys.exit(f"{label}: differs from the single call")

        for count in counts:
            per = -(-args.series // count)
            bounds = [(first, min(per, args.series - first))
                      for first in range(0, args.series, per)]
            ddf = dd.from_map(series_partition, bounds,
                              meta=frame.iloc[:0]).persist()
            wait(ddf)

            def run_series():
                out = phasor_dask.encode_frame(
                    ddf, targets, partitioned_by="series",
                    client_options=options, **FRAME_ARGS).persist()
                wait(out)
                return out

            run_series()  # Warm-up: each worker's channel.
            if count == counts[0] and args.pairs:
                paired[environ] = run_pairs(args, meter, targets, frame,
                                            run_series)
            wall, cpu = best(meter, run_series, args.repetitions)
            label = f"dask/series/P={count}/malloc={environ}"
            record(label, wall, cpu)
            check(run_series(), label)
            if count == counts[0]:
                wall, cpu = best(meter, lambda: phasor_dask.encode_frame(
                    ddf, targets, partitioned_by="series",
                    client_options=options, **FRAME_ARGS).compute(),
                    args.repetitions)
                record(f"{label}+gather", wall, cpu)

        for count in (int(p) for p in args.time_partitions.split(",")):
            per = ROWS_PER_SERIES // count
            bounds = [(args.series, first, per)
                      for first in range(0, ROWS_PER_SERIES, per)]
            ddf = dd.from_map(time_partition, bounds,
                              meta=frame.iloc[:0]).persist()
            wait(ddf)

            def run_time():
                out = phasor_dask.encode_frame(
                    ddf, targets, partitioned_by="time", lanes=args.lanes,
                    client_options=options, **FRAME_ARGS).persist()
                wait(out)
                return out

            wall, cpu = best(meter, run_time, args.repetitions)
            label = f"dask/time/P={count}/malloc={environ}"
            record(label, wall, cpu)
            # The time layout's rows are in another order: compare by
            # index.
            got = run_time().compute().reindex(reference_index)
            if got.to_numpy().tobytes() != reference_bytes:
                sys.exit(f"{label}: differs from the single call")
            del got


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True,
                        help="path of the phasor-server binary")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads per worker process")
    parser.add_argument("--worker_malloc", default="dask,inherit",
                        help="comma-separated WORKER_MALLOC keys")
    parser.add_argument("--series", type=int, default=100000)
    parser.add_argument("--partitions", default="40,10",
                        help="comma-separated partition counts")
    parser.add_argument("--time_partitions", default="10,2",
                        help="comma-separated partition counts of the "
                             "by-time layout (each divides R)")
    parser.add_argument("--lanes", type=int, default=None,
                        help="lanes of the by-time layout (default: one "
                             "per worker thread)")
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=6,
                        help="rounds of single call and dask/series at the "
                             "first partition count, taking turns")
    parser.add_argument("--skip_pandas", action="store_true")
    parser.add_argument("--out", help="write the JSON here, not stdout")
    args = parser.parse_args()
    rows = args.series * ROWS_PER_SERIES
    counts = [int(p) for p in args.partitions.split(",")]

    frame = series_partition((0, args.series))
    small = rows_of(0, 3, 0, ROWS_PER_SERIES)
    expected = panel_peer.dataframe(*panel_peer.workload(3))
    if not small.equals(expected):
        sys.exit("rows_of differs from panel_peer.workload")

    report = {}
    results = common.Results(argparse.Namespace(out=args.out))
    name = f"dask_panel/S={args.series}/R={ROWS_PER_SERIES}/C={NUM_CHANNELS}"

    def record(impl, wall, cpu):
        report[impl] = {"seconds": wall, "rows_per_second": rows / wall,
                        "cpu_seconds": cpu}
        results.rows.append({"name": f"{name}/impl={impl}",
                             "run_type": "aggregate", "aggregate_name": "min",
                             "real_time": wall * 1e9, "time_unit": "ns",
                             "repetitions": args.repetitions})
        print(f"{impl:40s} {wall:8.2f} s  {rows / wall / 1e6:6.2f} M rows/s"
              f"  cpu {', '.join(f'{k} {v:.1f} s' for k, v in cpu.items())}",
              file=sys.stderr, flush=True)

    servers = [panel_peer.Server(args.server, []) for _ in range(args.servers)]
    workspace = tempfile.mkdtemp(prefix="phasor-dask-bench-")
    try:
        targets = [server.target for server in servers]
        meter = CpuMeter(servers)
        with EncoderClient("ipv4:" + ",".join(targets),
                           load_balancing_policy="round_robin",
                           deadline_seconds=600) as client:
            client.encode_frame(frame.iloc[:1000], **FRAME_ARGS)  # Warm-up.
            wall, cpu = best(meter, lambda: client.encode_frame(
                frame, **FRAME_ARGS), args.repetitions)
            record("single", wall, cpu)
            reference = client.encode_frame(frame, **FRAME_ARGS).frame
        reference_bytes = reference.to_numpy().tobytes()
        reference_index = reference.index
        del reference

        paired = {}
        for environ in args.worker_malloc.split(","):
            run_dask(args, environ, servers, targets, frame, rows,
                     reference_bytes, reference_index, counts, workspace,
                     record, paired)
    finally:
        for server in servers:
            server.stop()

    if not args.skip_pandas:
        start_cpu = own_cpu_seconds()
        start = time.perf_counter()
        panel_peer.pandas_features(frame)
        record("pandas", time.perf_counter() - start,
               {"client": own_cpu_seconds() - start_cpu})

    single = report["single"]["seconds"]
    results.write("dask", extra={
        "variants": report,
        "paired": {
            f"single_vs_dask/series/P={counts[0]}/malloc={environ}": {
                "rounds": rounds,
                "ratios": [r["single"][0] / r["dask"][0] for r in rounds]}
            for environ, rounds in paired.items()},
        "ratios": {f"dask_vs_single/{impl}": single / value["seconds"]
                   for impl, value in report.items()
                   if impl.startswith("dask/")},
        "check": {"dask_equals_single_bytewise": True},
    })


if __name__ == "__main__":
    main()
