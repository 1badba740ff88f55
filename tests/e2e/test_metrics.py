"""/metrics of a real phasor-server after a known number of calls: the
go-grpc-prometheus RPC metrics and the domain metrics, counted exactly."""

import time
import unittest
import urllib.request

import grpc

import harness

ENCODER = "phasor.v1.Encoder"


class MetricsTest(unittest.TestCase):

    def setUp(self):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
