"""The large calls from Python through shared memory, loopback TCP and a
Unix socket, side by side with the core's own time for the same work.

Two workloads:
  P     workload P (bench/peers/panel_peer.py's docstring: 10,000 series x
        100 rows x 3 channels, F = 21 float32 columns), encode_panel of a
        profile holding P's spec; the core's time is bench/panel_bench's
        panel/threads=N (one EncodePanel into a caller-owned buffer).
  rope  ApplyRope of one fp32 query [1, 32, 4096, 128] (HF's [B, H, T, D],
        64 MiB in and 64 MiB out) and of the same bytes as [4096, 32, 128]
        ([T, H, D], the kernel's own order), positions 0..4095, plain RoPE
        (half layout); the kernel's time is bench/rope_bench's
        rope/dtype=fp32/layout=half/scaling=none/pos=contiguous/T=4096/
        [order=bhtd/]freq=cached/threads=N for the same order.

Ways from Python (/usr/bin/python3, phasor_client):
  shm        EncoderClient.shared_memory(): ModelInfer with inputs and
             outputs in a reused POSIX shared-memory region, its gRPC
             control messages over the Unix socket; results are views of
             the region (copy=False, the default)
  shm_copy   the same with copy=True (results copied out of the region)
  shm_array  shm with the inputs (P's timestamps and values, RoPE's query)
             already in SharedMemorySession.array()s, as a caller that
             produces its data there: no copy in the client
  shm_array_states  P only: shm_array with return_states=True, the
             series' states computed, sent and parsed too (without it
             the server skips them; the core's time includes them)
  tcp        the native call (encode_panel / apply_rope) over 127.0.0.1
  unix       the native call over unix:<socket>

Two phasor-servers with the same flags (--threads=N,
--system_shared_memory=true, a profile file with "p" and "rope") are
started, one on a free 127.0.0.1 port, one on a Unix socket in a fresh
temporary directory, and stopped by pid. Rounds: every way once per round
(or --consecutive calls in a row, the first --warm of them untimed: a warm
loop, as the core programs time theirs), the order rotating from round to
round, after one warm-up call each. The core program runs (--core-seconds,
one figure) before every round and after the last, so each round has the
core's time from just before and just after it: a shared host's speed
drifts by tens of percent within minutes, and a way is compared with the
core of the same minutes. A way's ratio is the median over rounds of
(its median in the round) / (the mean of the round's two core figures).
Every way's result is checked byte for byte against tcp's.

Prints a table and writes JSON (--out): medians, ratios to the core, the
machine's load before and after.

  /usr/bin/python3 bench/peers/shm_peer.py --build build --threads 2
"""
import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import panel_peer

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "..", "build", "python"))
from phasor_client import EncoderClient  # noqa: E402

PROFILES = (
    'profile { name: "p" spec { %s } }\n'
    'profile { name: "rope" spec { rope { } } }\n' % panel_peer.SPEC)
STARTUP_TIMEOUT_S = 30.0
ROPE_SHAPE = (1, 32, 4096, 128)
CORE_PANEL = "panel/threads={threads}"
CORE_ROPE = ("rope/dtype=fp32/layout=half/scaling=none/pos=contiguous/"
             "T=4096/{order}freq=cached/threads={threads}")
# rope_bench's order tag for each of the two request shapes.
ROPE_ORDERS = {"bhtd": "order=bhtd/", "thd": ""}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """phasor-server on `address` (host:port or unix:path), stopped by its
    pid."""

    def __init__(self, binary, address, target, flags):
        self.log = tempfile.TemporaryFile(mode="w+")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PHASOR_")}
        self.process = subprocess.Popen(
            [binary, f"--grpc_address={address}", "--metrics_address=",
             *flags], stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env)
        self.target = target
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        with EncoderClient(target, deadline_seconds=2) as client:
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


def core_time(program, name, threads, seconds):
    """Seconds per call of one Google Benchmark of `program` (the smallest
    size set, which holds the benchmark), timed for `seconds`."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [program, f"--phasor_threads={threads}", "--phasor_sizes=small",
             f"--benchmark_filter=^{name}/real_time$",
             f"--benchmark_min_time={seconds}", f"--benchmark_out={out.name}",
             "--benchmark_out_format=json"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = json.load(open(out.name))["benchmarks"]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    times = [row["real_time"] * scale[row["time_unit"]] for row in rows
             if row.get("run_type") == "iteration"]
    if not times:
        sys.exit(f"{program}: no benchmark named {name}")
    return times[0]


def rounds(ways, core, count, consecutive=1, warm=1):
    """({way: [[seconds] per round]}, [core seconds]): each way
    `consecutive` calls in a row per round (the first `warm` of them
    untimed when more than one: they pay for the caches the other ways
    left cold and for the host waking the server from idle, as the core
    programs' warm loop never does), the order rotating; core() before
    every round and after the last (count + 1 figures)."""
    names = list(ways)
    for name in names:  # Warm-up: channels, regions, widths, page faults.
        ways[name]()
    times = {name: [] for name in names}
    cores = []
    for r in range(count):
        cores.append(core())
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            untimed = min(warm, consecutive - 1) if consecutive > 1 else 0
            for _ in range(untimed):
                ways[name]()
            round_times = []
            for _ in range(max(consecutive - untimed, 1)):
                start = time.perf_counter()
                ways[name]()
                round_times.append(time.perf_counter() - start)
            times[name].append(round_times)
    cores.append(core())
    return times, cores


def paired_ratio(round_times, cores):
    """Median over rounds of the round's median ÷ its cores' mean."""
    return statistics.median(
        statistics.median(seconds) / ((cores[r] + cores[r + 1]) / 2)
        for r, seconds in enumerate(round_times))


def same_bytes(label, got, want):
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if got.dtype != want.dtype or got.shape != want.shape or \
            got.tobytes() != want.tobytes():
        sys.exit(f"{label}: differs from the TCP result")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build",
                        help="build tree with server/phasor-server and "
                             "bench/{panel,rope}_bench")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--consecutive", type=int, default=1,
                        help="calls of a way in a row per round (> 1: the "
                             "first untimed, as a warm loop like the core "
                             "programs')")
    parser.add_argument("--warm", type=int, default=1,
                        help="with --consecutive: how many of a round's "
                             "calls of a way go untimed first")
    parser.add_argument("--core-seconds", type=float, default=0.3,
                        help="how long each run of a core program times")
    parser.add_argument("--series", type=int, default=10000)
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args()
    binary = os.path.join(args.build, "server", "phasor-server")
    panel_bench = os.path.join(args.build, "bench", "panel_bench")
    rope_bench = os.path.join(args.build, "bench", "rope_bench")
    core_panel = CORE_PANEL.format(threads=args.threads)
    core_rope = {label: CORE_ROPE.format(order=order, threads=args.threads)
                 for label, order in ROPE_ORDERS.items()}
    load_before = open("/proc/loadavg").read().split()[:3]


    def core_p():
        return core_time(panel_bench, core_panel, args.threads,
                         args.core_seconds)

    def core_rope_time(label):
        return lambda: core_time(rope_bench, core_rope[label], args.threads,
                                 args.core_seconds)

    timestamps, values, offsets = panel_peer.workload(args.series)
    query = np.random.default_rng(0).standard_normal(ROPE_SHAPE).astype(
        np.float32)
    query_thd = np.ascontiguousarray(query[0].transpose(1, 0, 2))

    scratch = tempfile.mkdtemp(prefix="phasor-shm-peer-")
    profiles = os.path.join(scratch, "profiles.txtpb")
    with open(profiles, "w") as f:
        f.write(PROFILES)
    flags = [f"--profiles={profiles}", f"--threads={args.threads}",
             "--system_shared_memory=true",
             f"--max_elements_per_request={1 << 26}"]
    port = free_port()
    socket_path = os.path.join(scratch, "phasor.sock")
    servers = []
    try:
        servers.append(Server(binary, f"127.0.0.1:{port}",
                              f"127.0.0.1:{port}", flags))
        servers.append(Server(binary, f"unix:{socket_path}",
                              f"unix:{socket_path}", flags))
        tcp = EncoderClient(servers[0].target, deadline_seconds=300)
        unix = EncoderClient(servers[1].target, deadline_seconds=300)
        shm = unix.shared_memory()
        shm_copy = unix.shared_memory(copy=True)

        def panel(client):
            return lambda: client.encode_panel(
                timestamps, values, series_offsets=offsets, profile="p")

        def panel_shm(session):
            return lambda: session.encode_panel(
                timestamps, values, series_offsets=offsets, profile="p")

        want = panel(tcp)().features
        same_bytes("P unix", panel(unix)().features, want)
        same_bytes("P shm", panel_shm(shm)().features, want)
        same_bytes("P shm_copy", panel_shm(shm_copy)().features, want)
        placed_t = shm.array("timestamps", timestamps.shape, timestamps.dtype)
        placed_t[...] = timestamps
        placed_v = shm.array("values", values.shape, values.dtype)
        placed_v[...] = values

        def panel_placed():
            return shm.encode_panel(placed_t, placed_v, series_offsets=offsets,
                                    profile="p")

        def panel_placed_states():
            return shm.encode_panel(placed_t, placed_v, series_offsets=offsets,
                                    profile="p", return_states=True)

        same_bytes("P shm_array", panel_placed().features, want)
        same_bytes("P shm_array_states", panel_placed_states().features, want)
        times_p = rounds({"shm": panel_shm(shm), "shm_array": panel_placed,
                          "shm_array_states": panel_placed_states,
                          "shm_copy": panel_shm(shm_copy),
                          "tcp": panel(tcp), "unix": panel(unix)},
                         core_p, args.rounds, args.consecutive, args.warm)

        rope_times = {}
        for label, array in (("bhtd", query), ("thd", query_thd)):
            def rope(client, array=array):
                return lambda: client.apply_rope(array, profile="rope")
            want = rope(tcp)().query
            same_bytes(f"rope {label} shm", rope(shm)().query, want)
            same_bytes(f"rope {label} unix", rope(unix)().query, want)
            same_bytes(f"rope {label} shm_copy", rope(shm_copy)().query, want)
            # The query produced in a session array (SharedMemorySession.
            # array): the call reads it where it lies, no copy in the client.
            placed = shm.array(f"query_{label}", array.shape, array.dtype)
            placed[...] = array
            same_bytes(f"rope {label} shm_array", rope(shm, placed)().query,
                       want)
            del want
            rope_times[label] = rounds(
                {"shm": rope(shm), "shm_array": rope(shm, placed),
                 "shm_copy": rope(shm_copy),
                 "tcp": rope(tcp), "unix": rope(unix)},
                core_rope_time(label), args.rounds, args.consecutive,
                args.warm)
        shm.close()
        shm_copy.close()
        tcp.close()
        unix.close()
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    load_after = open("/proc/loadavg").read().split()[:3]

    table = []
    result = {"threads": args.threads, "rounds": args.rounds,
              "consecutive": args.consecutive, "warm": args.warm,
              "core_seconds": args.core_seconds,
              "host": platform.node(), "cpus": os.cpu_count(),
              "load_before": load_before, "load_after": load_after,
              "core": {}, "ways": {}, "ratios": {}}
    for workload, sets in (
            ("P", {"": (core_panel, times_p)}),
            ("rope", {f" {k}": (core_rope[k], v)
                      for k, v in rope_times.items()})):
        for suffix, (core_name, (times, cores)) in sets.items():
            result["core"][f"{workload}{suffix}"] = {
                "name": core_name, "median_s": statistics.median(cores),
                "all_s": cores}
            table.append((f"{workload}{suffix} core ({core_name})",
                          statistics.median(cores), 1.0))
            for way, round_times in times.items():
                median = statistics.median(
                    t for seconds in round_times for t in seconds)
                ratio = paired_ratio(round_times, cores)
                key = f"{workload}{suffix} {way}"
                result["ways"][key] = {"median_s": median,
                                       "rounds_s": round_times}
                result["ratios"][key] = ratio
                table.append((key, median, ratio))
    for name, seconds, ratio in table:
        print(f"{name:78s} {seconds * 1e3:9.1f} ms  {ratio:5.2f}x")
    print(f"load before {' '.join(load_before)}, after {' '.join(load_after)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
