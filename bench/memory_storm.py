"""Peak and idle memory of phasor-server under a storm of large replies.

Starts the given phasor-server binary on loopback, optionally inside a new
cgroup v1 memory cgroup limited to --cgroup_bytes (a child of this process's
own; needs root), fires --calls concurrent EncodeObservations calls whose
replies are about --reply_mib MiB each (a time sinusoid of width 64 and the
global gap: 65 float32 columns), and prints each call's outcome, the
server's VmRSS before, its peak (VmHWM), its VmRSS every 0.5 s for --idle_s
seconds after the storm, and the cgroup's peak and OOM kills. Flags after
`--` go to the server.

    /usr/bin/python3 bench/memory_storm.py --server build/server/phasor-server \\
        [--cgroup_bytes 1073741824] [--calls 16] [--reply_mib 62] [--idle_s 3] \\
        [--python_dir build/python] [-- --memory_wait_seconds=0 ...]
"""
import argparse
import concurrent.futures
import os
import socket
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--cgroup_bytes", type=int, default=0)
    parser.add_argument("--calls", type=int, default=16)
    parser.add_argument("--reply_mib", type=int, default=62)
    parser.add_argument("--idle_s", type=float, default=3.0)
    parser.add_argument("--python_dir", default="build/python")
    parser.add_argument("server_flags", nargs="*")
    args = parser.parse_args()
    sys.path.insert(0, args.python_dir)
    import grpc
    import numpy as np
    from phasor_client import pb

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [args.server, f"--grpc_address=127.0.0.1:{port}", "--metrics_address=",
               *args.server_flags]
    cgroup = None
    if args.cgroup_bytes:
        with open("/proc/self/cgroup") as f:
            own = next(line.rstrip("\n").split(":", 2)[2] for line in f
                       if "memory" in line.split(":")[1].split(","))
        cgroup = f"/sys/fs/cgroup/memory{own.rstrip('/')}/memory-storm-{os.getpid()}"
        os.mkdir(cgroup)
        with open(f"{cgroup}/memory.limit_in_bytes", "w") as f:
            f.write(str(args.cgroup_bytes))
        command = ["sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "sh",
                   f"{cgroup}/cgroup.procs", *command]
    log = tempfile.TemporaryFile(mode="w+")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def status_bytes(key):
        try:
            with open(f"/proc/{server.pid}/status") as status:
                for line in status:
                    if line.startswith(key):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None

    options = [("grpc.max_receive_message_length", 64 << 20),
               ("grpc.use_local_subchannel_pool", 1)]
    spec = pb.EncoderSpec(temporal=pb.TemporalSpec(
        time=pb.TimeBlock(dim=64), gaps=pb.GapsBlock(global_delta=True)))

    def request(rows):
        times = 1_700_000_000 * 10**9 + np.arange(rows, dtype=np.int64) * 10**9
        return pb.EncodeObservationsRequest(spec=spec, observations=pb.Observations(
            timestamps=pb.Tensor(shape=[rows], dtype=pb.INT64,
                                 data=times.tobytes()))).SerializeToString()

    def call(payload):
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            start = time.monotonic()
            try:
                reply = channel.unary_unary("/phasor.v1.Encoder/EncodeObservations")(
                    payload, timeout=120)
                return "OK", len(reply), time.monotonic() - start
            except grpc.RpcError as error:
                return error.code().name, error.details()[:100], time.monotonic() - start

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.05)
        code, width_probe, _ = call(request(2))
        assert code == "OK", width_probe
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            probe = pb.EncodeObservationsResponse.FromString(channel.unary_unary(
                "/phasor.v1.Encoder/EncodeObservations")(request(2), timeout=30))
        rows = ((args.reply_mib << 20) - (64 << 10)) // (probe.features.shape[1] * 4)
        payload = request(rows)
        print(f"{args.calls} calls, {rows} rows: {len(payload)} request bytes, "
              f"{rows * probe.features.shape[1] * 4} feature bytes each")
        print(f"VmRSS before: {status_bytes('VmRSS:')}")
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.calls) as pool:
            results = list(pool.map(call, [payload] * args.calls))
        print(f"storm: {time.monotonic() - start:.2f} s")
        for code, detail, seconds in results:
            print(f"  {code} {detail} {seconds:.2f} s")
        print(f"alive: {server.poll() is None}; VmHWM: {status_bytes('VmHWM:')}")
        for step in range(int(args.idle_s / 0.5) + 1):
            print(f"  idle +{step * 0.5:.1f} s: VmRSS {status_bytes('VmRSS:')}")
            time.sleep(0.5)
        if cgroup:
            with open(f"{cgroup}/memory.max_usage_in_bytes") as f:
                peak = int(f.read())
            with open(f"{cgroup}/memory.oom_control") as f:
                kills = dict(line.split() for line in f).get("oom_kill")
            print(f"cgroup: peak {peak}, OOM kills {kills}")
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
        log.seek(0)
        config = next((line for line in log if "event=config" in line), "")
        budget = [field for field in config.split() if field.startswith("memory_budget")]
        print(" ".join(budget))
        if cgroup:
            for _ in range(100):
                try:
                    os.rmdir(cgroup)
                    break
                except OSError:
                    time.sleep(0.1)


if __name__ == "__main__":
    main()
