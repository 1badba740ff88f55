"""/metrics of a real phasor-server after a known number of calls: the
go-grpc-prometheus RPC metrics and the domain metrics, counted exactly; the
standard process metrics with plausible values; and the whole exposition
passes `promtool check metrics`."""

import os
import resource
import shutil
import subprocess
import time
import unittest
import urllib.request

import grpc

import harness

ENCODER = "phasor.v1.Encoder"


class MetricsTest(unittest.TestCase):

    def setUp(self):
        self.spawned_at = time.time()
        self.server = harness.Server().start()
        self.addCleanup(self.server.__exit__, None, None, None)

    def wait_for(self, name, expected, **labels):
        """Polls /metrics until `name{labels}` reaches `expected` (the
        interceptor records a call as it completes, which may trail the
        client's view by a moment); returns the last parsed samples."""
        deadline = time.monotonic() + 10
        while True:
            samples = harness.parse_metrics(self.server.metrics())
            value = harness.metric_value(samples, name, **labels)
            if value == expected or time.monotonic() > deadline:
                return samples
            time.sleep(0.05)

    def test_rpc_and_domain_metrics(self):
        ok_calls, dim, count = 5, 8, 10
        with self.server.client(deadline_seconds=10) as client:
            for _ in range(ok_calls - 1):
                client.encode_positions(count=count, dim=dim)
            with self.assertRaises(grpc.RpcError):
                client.encode_positions(count=count, dim=dim - 1)
        # One of the calls through the C++ client.
        result = harness.run_client("--target", self.server.target,
                                    "encode-positions", "--count", count,
                                    "--dim", dim)
        self.assertEqual(result.returncode, 0, result.stderr)

        method = dict(grpc_service=ENCODER, grpc_method="EncodePositions",
                      grpc_type="unary")
        samples = self.wait_for("grpc_server_handled_total", ok_calls,
                                grpc_code="OK", **method)
        self.assertEqual(harness.metric_value(
            samples, "grpc_server_handled_total", grpc_code="OK", **method),
            ok_calls)
        # Code labels are spelled as go-grpc-prometheus spells them (Go's
        # codes.Code names), so existing dashboards match.
        self.assertEqual(harness.metric_value(
            samples, "grpc_server_handled_total", grpc_code="InvalidArgument",
            **method), 1)
        started = harness.metric_value(samples, "grpc_server_started_total",
                                       **method)
        self.assertEqual(started, ok_calls + 1)

        # Histogram: cumulative buckets ending in +Inf = _count.
        buckets = sorted(
            ((float(dict(labels)["le"]), value)
             for (name, labels), value in samples.items()
             if name == "grpc_server_handling_seconds_bucket"
             and dict(labels).get("grpc_method") == "EncodePositions"),
            key=lambda pair: pair[0])
        self.assertGreaterEqual(len(buckets), 5)
        self.assertEqual(buckets[-1][0], float("inf"))
        counts = [value for _, value in buckets]
        self.assertEqual(counts, sorted(counts))
        self.assertEqual(buckets[-1][1], harness.metric_value(
            samples, "grpc_server_handling_seconds_count", **method))
        self.assertEqual(buckets[-1][1], started)
        self.assertGreater(harness.metric_value(
            samples, "grpc_server_handling_seconds_sum", **method), 0)

        # Values computed: count·dim per successful call (the failed call
        # and the health polls encode nothing).
        encoded = harness.metric_value(samples, "phasor_encoded_values_total")
        successful = harness.metric_value(
            samples, "grpc_server_handled_total", grpc_code="OK", **method)
        self.assertEqual(encoded, successful * count * dim)
        self.assertGreater(harness.metric_value(
            samples, "phasor_request_bytes_total",
            grpc_method="EncodePositions"), 0)
        self.assertGreaterEqual(harness.metric_value(
            samples, "phasor_response_bytes_total",
            grpc_method="EncodePositions"), successful * count * dim * 4)

        # Health checks (the harness polled them) are counted like any RPC.
        self.assertGreaterEqual(harness.metric_value(
            samples, "grpc_server_handled_total",
            grpc_service="grpc.health.v1.Health", grpc_method="Check",
            grpc_code="OK"), 1)

    def test_exposition_format(self):
        url = f"http://127.0.0.1:{self.server.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            self.assertEqual(response.status, 200)
            self.assertIn("text/plain", response.headers["Content-Type"])
            text = response.read().decode()
        self.assertIn("# TYPE grpc_server_handled_total counter", text)
        self.assertIn("# TYPE grpc_server_handling_seconds histogram", text)
        self.assertIn("# TYPE phasor_encoded_values_total counter", text)

    def test_process_metrics(self):
        text = self.server.metrics()
        # Types as the Prometheus client libraries declare them.
        self.assertIn("# TYPE process_cpu_seconds_total counter", text)
        for name in ("process_resident_memory_bytes",
                     "process_virtual_memory_bytes", "process_open_fds",
                     "process_max_fds", "process_start_time_seconds"):
            self.assertIn(f"# TYPE {name} gauge", text)
        samples = harness.parse_metrics(text)

        def value(name):
            found = harness.metric_value(samples, name)
            self.assertIsNotNone(found, name)
            return found

        pid = self.server.process.pid
        # Resident memory: what the kernel says of the same process now
        # (statm field 2, pages), within a factor of 2 either way.
        rss = value("process_resident_memory_bytes")
        with open(f"/proc/{pid}/statm") as f:
            kernel_rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        self.assertGreater(rss, 1 << 20)
        self.assertLess(abs(rss - kernel_rss), max(rss, kernel_rss) / 2)
        self.assertGreaterEqual(value("process_virtual_memory_bytes"), rss)
        # Started between this test's spawn and now (clock-tick
        # resolution: allow a second either side).
        start = value("process_start_time_seconds")
        self.assertGreaterEqual(start, self.spawned_at - 1)
        self.assertLessEqual(start, time.time() + 1)
        # Descriptors: the kernel's count, within the few a scrape opens
        # and closes; the limit is the one the server inherited from us.
        open_fds = value("process_open_fds")
        kernel_fds = len(os.listdir(f"/proc/{pid}/fd"))
        self.assertGreaterEqual(open_fds, 3)
        self.assertLess(abs(open_fds - kernel_fds), 8)
        self.assertLessEqual(open_fds, value("process_max_fds"))
        self.assertEqual(value("process_max_fds"),
                         resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        # CPU: grows with work.
        before = value("process_cpu_seconds_total")
        self.assertGreaterEqual(before, 0)
        with self.server.client(deadline_seconds=30) as client:
            deadline = time.monotonic() + 20
            after = before
            while after <= before and time.monotonic() < deadline:
                client.encode_positions(count=20000, dim=256)
                after = value_of(self.server, "process_cpu_seconds_total")
        self.assertGreater(after, before)

    def test_promtool_check_metrics(self):
        # The exposition passes Prometheus' own linter (promtool, Debian's
        # prometheus package; deploy/install-deps.sh --test installs it).
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool not installed: run "
                             "deploy/install-deps.sh --test")
        with self.server.client(deadline_seconds=10) as client:
            client.encode_positions(count=4, dim=8)
        result = subprocess.run([promtool, "check", "metrics"],
                                input=self.server.metrics(),
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.strip(), "", result.stdout)


def value_of(server, name):
    return harness.metric_value(harness.parse_metrics(server.metrics()), name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
