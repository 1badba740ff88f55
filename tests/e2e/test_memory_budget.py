"""The memory budget of calls in flight, end to end.

In a container: phasor-server is started inside a 1 GiB memory cgroup (what
Kubernetes' resources.limits.memory makes), takes its budget from that limit
(0.6 of it, logged in the config record), and survives 16 concurrent
EncodeObservations calls whose replies are 62 MiB each: every call is OK or
RESOURCE_EXHAUSTED ("the server's memory budget is in use"), at least one is
OK, a cheap call made meanwhile is answered, nothing is OOM-killed, and once
idle the server's resident memory falls back under 300 MB within seconds. The
same storm with the budget lifted (--memory_budget_bytes far above the
limit) gets the server OOM-killed, which shows the cgroup really limits it
and the storm really needs the budget.

Retries: a call larger than the whole budget is refused at once and marked
not to be retried (grpc-retry-pushback-ms: -1), so a client with Phasor's
default service config sends it once; a call refused because the budget is
in use carries no pushback and that client retries it.

Needs root and a memory cgroup controller: cgroup v1's (a child of this
process's own memory cgroup is made, limited, and removed afterwards) or a
writable cgroup v2 hierarchy with the memory controller. Without either the
test fails saying so, rather than skip: a skip would hide that the limit is
not exercised. Labelled no_sanitizer: ASan's shadow memory and quarantine
change RSS."""

import concurrent.futures
import os
import re
import time
import unittest
import uuid

import grpc
import numpy as np

import harness
from phasor_client import pb
from phasor_client.client import DEFAULT_SERVICE_CONFIG

LIMIT_BYTES = 1 << 30
BUDGET_FRACTION = 0.6  # server/memory_limit.h kMemoryBudgetFraction
CALLS = 16
# Large enough that without the budget the replies alone (16 x 62 MiB =
# 1.04 GB) exceed the limit and the server is OOM-killed; within the
# default 64 MiB message limit.
REPLY_BYTES = 62 << 20
IDLE_RSS_BYTES = 300 * 10**6
IDLE_WITHIN_SECONDS = 5.0
MESSAGE_BYTES = 64 << 20
ENCODE_OBSERVATIONS = "/phasor.v1.Encoder/EncodeObservations"
ENCODE_POSITIONS = "/phasor.v1.Encoder/EncodePositions"

# A time sinusoid of width 64 and the global gap: 65 float32 features a row.
SPEC = pb.EncoderSpec(temporal=pb.TemporalSpec(
    time=pb.TimeBlock(dim=64), gaps=pb.GapsBlock(global_delta=True)))


def observations_request(rows):
    """Serialized EncodeObservationsRequest: `rows` timestamps 1 s apart."""
    times = 1_700_000_000 * 10**9 + np.arange(rows, dtype=np.int64) * 10**9
    return pb.EncodeObservationsRequest(
        spec=SPEC, observations=pb.Observations(timestamps=pb.Tensor(
            shape=[rows], dtype=pb.INT64, data=times.tobytes()))).SerializeToString()


def positions_request(count, dim):
    return pb.EncodePositionsRequest(
        positions=pb.Positions(range=pb.Positions.Range(count=count)),
        spec=pb.EncoderSpec(positional=pb.PositionalSpec(
            sinusoidal=pb.SinusoidalSpec(dim=dim)))).SerializeToString()


def channel(target, retries=False):
    """A channel of its own (no shared subchannel, so its own connection)
    that hands back raw response bytes; with `retries`, the Python client's
    default service config."""
    options = [("grpc.max_receive_message_length", MESSAGE_BYTES),
               ("grpc.max_send_message_length", MESSAGE_BYTES),
               ("grpc.use_local_subchannel_pool", 1),
               ("grpc.enable_retries", 1 if retries else 0)]
    if retries:
        options.append(("grpc.service_config", DEFAULT_SERVICE_CONFIG))
    return grpc.insecure_channel(target, options=options)


def call(target, method, request, timeout=120, retries=False):
    """(code name, reply length or details, trailing metadata dict)."""
    with channel(target, retries) as chan:
        stub = chan.unary_unary(method)
        try:
            reply, rpc = stub.with_call(request, timeout=timeout)
            return "OK", len(reply), dict(rpc.trailing_metadata() or ())
        except grpc.RpcError as error:
            return (error.code().name, error.details(),
                    dict(error.trailing_metadata() or ()))


def process_bytes(pid, key):
    """A "VmRSS:"/"VmHWM:" line of /proc/<pid>/status in bytes; None once the
    process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def own_cgroup_dir(controller_line, fstype, option):
    """This process's cgroup directory in the hierarchy of `controller_line`
    (a /proc/self/cgroup predicate), mounted as `fstype` with `option`."""
    with open("/proc/self/cgroup") as f:
        paths = [line.rstrip("\n").split(":", 2) for line in f]
    path = next((p[2] for p in paths if controller_line(p)), None)
    if path is None:
        return None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            dash = fields.index("-")
            if fields[dash + 1] != fstype:
                continue
            if option and option not in fields[dash + 3].split(","):
                continue
            root, mount = fields[3], fields[4].replace("\\040", " ")
            relative = path[len(root):] if path.startswith(root) else ""
            if root == "/":
                relative = path
            return os.path.join(mount, relative.lstrip("/"))
    return None


class MemoryCgroup:
    """A child memory cgroup limited to `limit_bytes`, removed on close.
    `launcher` is a command prefix that moves itself into the cgroup, then
    execs the rest (so the server's pid and children live in it)."""

    def __init__(self, limit_bytes):
        self.limit_bytes = limit_bytes
        self.path = None
        self.version = None
        errors = []
        name = f"phasor-e2e-memory-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        v1 = own_cgroup_dir(lambda p: "memory" in p[1].split(","), "cgroup", "memory")
        if v1 is not None:
            try:
                self._make_v1(os.path.join(v1, name))
                return
            except OSError as error:
                errors.append(f"cgroup v1 at {v1}: {error}")
                self.close()
        v2 = own_cgroup_dir(lambda p: p[0] == "0" and p[1] == "", "cgroup2", None)
        if v2 is not None:
            try:
                self._make_v2(v2, name)
                return
            except OSError as error:
                errors.append(f"cgroup v2 at {v2}: {error}")
                self.close()
        raise RuntimeError(
            "no memory cgroup could be made for the test (needs root and cgroup "
            "v1's memory controller, or a writable cgroup v2 hierarchy with the "
            "memory controller): " + ("; ".join(errors) or "no memory hierarchy "
                                      "in /proc/self/cgroup and mountinfo"))

    def _make_v1(self, path):
        os.mkdir(path)
        self.path, self.version = path, 1
        self._write("memory.limit_in_bytes", self.limit_bytes)
        # Without swap headroom: the limit is the limit.
        if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
            self._write("memory.memsw.limit_in_bytes", self.limit_bytes)
        if int(self._read("memory.limit_in_bytes")) != self.limit_bytes:
            raise OSError("memory.limit_in_bytes did not take the limit")

    def _make_v2(self, parent, name):
        controllers = os.path.join(parent, "cgroup.subtree_control")
        with open(controllers) as f:
            enabled = f.read().split()
        if "memory" not in enabled:
            with open(controllers, "w") as f:
                f.write("+memory")
        path = os.path.join(parent, name)
        os.mkdir(path)
        self.path, self.version = path, 2
        self._write("memory.max", self.limit_bytes)
        if os.path.exists(os.path.join(path, "memory.swap.max")):
            self._write("memory.swap.max", 0)

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def _read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    @property
    def launcher(self):
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "sh", procs]

    def oom_kills(self):
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        for line in self._read(name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def peak_bytes(self):
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int(self._read(name))
        except OSError:
            return None

    def close(self):
        """Removes the cgroup once its processes are gone (bounded wait)."""
        if self.path is None or not os.path.isdir(self.path):
            return
        deadline = time.monotonic() + 10
        while True:
            try:
                os.rmdir(self.path)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def config_record(log):
    """The config log line's key=value pairs (text format)."""
    for line in log.splitlines():
        if "event=config" in line:
            return dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', line))
    raise AssertionError(f"no config record in the log:\n{log}")


def storm(target, request, calls):
    """`calls` concurrent EncodeObservations; returns the futures."""
    pool = concurrent.futures.ThreadPoolExecutor(calls)
    futures = [pool.submit(call, target, ENCODE_OBSERVATIONS, request)
               for _ in range(calls)]
    pool.shutdown(wait=False)
    return futures


class MemoryBudgetInACgroupTest(unittest.TestCase):

    def start_in_cgroup(self, flags=()):
        try:
            cgroup = MemoryCgroup(LIMIT_BYTES)
        except RuntimeError as error:
            self.fail(str(error))
        # Removed last: after the server is stopped (cleanups run LIFO).
        self.addCleanup(cgroup.close)
        server = harness.Server(["--threads=2", *flags], launcher=cgroup.launcher)
        self.addCleanup(server.__exit__, None, None, None)
        server.start()
        return cgroup, server

    def big_request(self, target):
        """A request whose reply is about REPLY_BYTES, sized from the width
        the server reports for two rows."""
        with channel(target) as chan:
            probe = pb.EncodeObservationsResponse.FromString(
                chan.unary_unary(ENCODE_OBSERVATIONS)(observations_request(2),
                                                      timeout=30))
        width = probe.features.shape[1]
        rows = (REPLY_BYTES - (64 << 10)) // (width * 4)
        return observations_request(rows), rows * width * 4

    def test_a_storm_of_large_replies_stays_within_the_limit(self):
        cgroup, server = self.start_in_cgroup()
        pid = server.process.pid
        config = config_record(server.log())
        budget = int(LIMIT_BYTES * BUDGET_FRACTION)
        self.assertEqual(int(config["memory_budget_bytes"]), budget, config)
        self.assertIn(f"cgroup v{cgroup.version} ", config["memory_budget_source"])
        self.assertIn(os.path.basename(cgroup.path), config["memory_budget_source"])

        request, reply_bytes = self.big_request(server.target)
        baseline = process_bytes(pid, "VmRSS:")
        futures = storm(server.target, request, CALLS)

        # A cheap call while the storm holds the budget.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            in_use = harness.metric_value(harness.parse_metrics(server.metrics()),
                                          "phasor_memory_in_use_bytes")
            if in_use and in_use > budget / 2:
                break
            time.sleep(0.01)
        cheap = call(server.target, ENCODE_OBSERVATIONS, observations_request(3),
                     timeout=10)
        storm_still_running = any(not f.done() for f in futures)
        self.assertEqual(cheap[0], "OK", cheap)
        self.assertTrue(storm_still_running,
                        "the storm ended before the cheap call: nothing was tested")

        results = [f.result(timeout=300) for f in futures]
        peak = process_bytes(pid, "VmHWM:")
        codes = [code for code, _, _ in results]
        self.assertIsNone(server.process.poll(),
                          f"phasor-server died (OOM kills: {cgroup.oom_kills()}); "
                          f"calls: {codes}\n{server.log()[-2000:]}")
        self.assertEqual(cgroup.oom_kills(), 0)
        with server.client() as client:
            self.assertEqual(client.health(), "SERVING")
        self.assertTrue(set(codes) <= {"OK", "RESOURCE_EXHAUSTED"}, results)
        self.assertGreaterEqual(codes.count("OK"), 1)
        for code, detail, _ in results:
            if code == "OK":
                self.assertGreaterEqual(detail, reply_bytes)
            else:
                self.assertIn("memory budget is in use by other calls", detail)

        # The budget's gauges and the refusals.
        deadline = time.monotonic() + 10
        while True:
            samples = harness.parse_metrics(server.metrics())
            if harness.metric_value(samples, "phasor_memory_in_use_bytes") == 0:
                break
            self.assertLess(time.monotonic(), deadline, "memory still in use")
            time.sleep(0.05)
        self.assertEqual(harness.metric_value(samples, "phasor_memory_budget_bytes"),
                         budget)
        self.assertEqual(harness.metric_value(
            samples, "phasor_memory_refused_total", grpc_method="EncodeObservations",
            reason="busy"), codes.count("RESOURCE_EXHAUSTED"))

        # Idle: the memory goes back to the system.
        deadline = time.monotonic() + IDLE_WITHIN_SECONDS
        while True:
            idle = process_bytes(pid, "VmRSS:")
            if idle < IDLE_RSS_BYTES or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        print(f"\n{CALLS} calls of {reply_bytes} reply bytes in a "
              f"{LIMIT_BYTES}-byte cgroup: {codes.count('OK')} OK, "
              f"{codes.count('RESOURCE_EXHAUSTED')} RESOURCE_EXHAUSTED; VmRSS "
              f"baseline {baseline}, peak (VmHWM) {peak}, idle {idle}; cgroup "
              f"peak {cgroup.peak_bytes()}")
        self.assertLess(idle, IDLE_RSS_BYTES,
                        f"VmRSS still {idle} bytes {IDLE_WITHIN_SECONDS} s after the storm")

    def test_without_the_budget_the_same_storm_is_oom_killed(self):
        # The control: the cgroup does limit the server, and the storm does
        # need the budget.
        cgroup, server = self.start_in_cgroup([f"--memory_budget_bytes={1 << 40}"])
        request, _ = self.big_request(server.target)
        results = [f.result(timeout=300) for f in storm(server.target, request, CALLS)]
        server.process.wait(timeout=30)
        self.assertEqual(server.process.returncode, -9, results)
        self.assertGreaterEqual(cgroup.oom_kills(), 1)
        self.assertIn("UNAVAILABLE", [code for code, _, _ in results])


class RetryPushbackTest(unittest.TestCase):

    def started(self, server, method):
        return harness.metric_value(harness.parse_metrics(server.metrics()),
                                    "grpc_server_started_total", grpc_method=method) or 0

    def test_a_call_over_the_whole_budget_is_refused_once(self):
        with harness.Server([f"--memory_budget_bytes={16 << 20}"]) as server:
            # 65536 x 128 float32 = 32 MiB of reply.
            code, detail, trailers = call(server.target, ENCODE_POSITIONS,
                                          positions_request(65536, 128), retries=True)
            self.assertEqual(code, "RESOURCE_EXHAUSTED")
            self.assertIn("more than the server's whole memory budget of 16777216 bytes",
                          detail)
            self.assertEqual(trailers.get("grpc-retry-pushback-ms"), "-1")
            self.assertEqual(self.started(server, "EncodePositions"), 1)
            # Limits a retry cannot fix are marked the same way.
            code, _, trailers = call(server.target, ENCODE_POSITIONS,
                                     positions_request(1 << 30, 64), retries=True)
            self.assertEqual(code, "RESOURCE_EXHAUSTED")
            self.assertEqual(trailers.get("grpc-retry-pushback-ms"), "-1")
            self.assertEqual(self.started(server, "EncodePositions"), 2)

    def test_a_busy_refusal_is_retried(self):
        # Room for two 16 MiB replies at a time, no waiting: most of 16
        # concurrent calls find the budget in use.
        flags = [f"--memory_budget_bytes={40 << 20}", "--memory_wait_seconds=0"]
        request = positions_request(32768, 128)
        with harness.Server(flags) as server:
            with concurrent.futures.ThreadPoolExecutor(CALLS) as pool:
                plain = list(pool.map(
                    lambda _: call(server.target, ENCODE_POSITIONS, request), range(CALLS)))
            busy = [r for r in plain if r[0] == "RESOURCE_EXHAUSTED"]
            self.assertTrue(busy, "no call found the budget in use")
            for _, detail, trailers in busy:
                self.assertIn("in use by other calls", detail)
                self.assertNotIn("grpc-retry-pushback-ms", trailers)
            self.assertEqual(self.started(server, "EncodePositions"), CALLS)

            # The same calls through the client's service config.
            with concurrent.futures.ThreadPoolExecutor(CALLS) as pool:
                retried = list(pool.map(
                    lambda _: call(server.target, ENCODE_POSITIONS, request, retries=True),
                    range(CALLS)))
            self.assertTrue({r[0] for r in retried} <= {"OK", "RESOURCE_EXHAUSTED"}, retried)
            refused = harness.metric_value(
                harness.parse_metrics(server.metrics()), "phasor_memory_refused_total",
                grpc_method="EncodePositions", reason="busy") - len(busy)
            retries = self.started(server, "EncodePositions") - 2 * CALLS
            self.assertGreater(refused, 0, "no retried call found the budget in use")
            self.assertGreater(retries, 0, "busy refusals were not retried")
            # Every refusal was retried, except a call's last one (the answer
            # it got): refusals = retries + calls that ended refused.
            final = sum(r[0] == "RESOURCE_EXHAUSTED" for r in retried)
            self.assertEqual(refused, retries + final, retried)


if __name__ == "__main__":
    unittest.main(verbosity=2)
