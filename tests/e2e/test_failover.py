"""Scale-out under failure, with the Python client's default service config:
three phasor-server replicas on loopback behind one round_robin channel over
a static address list; one replica gets SIGTERM while calls are in flight.

Asserts that every call the load generator made was answered OK (the
draining replica's refusals were retried on the others), that the replica
exited 0, and that round_robin spread the calls within 10% across the live
replicas, counted by each replica's own grpc_server_handled_total: across
all three before the signal, across the two survivors after it.

tests/e2e/client_failover_test.cc does the same with the C++ EncoderClient.
"""

import json
import threading
import time
import unittest

import numpy as np

import harness
import phasor_client

REPLICAS = 3
THREADS = 4
# Small calls: the test measures routing, not the kernels.
COUNT, DIM = 64, 32
PHASE_CALLS = 600          # calls per measured phase, over all threads
SPREAD = 0.10              # allowed |calls_i / mean - 1| per replica
HANDLED_OK = dict(grpc_service="phasor.v1.Encoder",
                  grpc_method="EncodePositions", grpc_code="OK")


def handled(server):
    value = harness.metric_value(harness.parse_metrics(server.metrics()),
                                 "grpc_server_handled_total", **HANDLED_OK)
    return int(value or 0)


class Load:
    """THREADS threads calling encode_positions until stop(); counts the OK
    answers and keeps every failure."""

    def __init__(self, client, expected):
        self.client = client
        self.expected = expected
        self.ok = 0
        self.failures = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._run)
                        for _ in range(THREADS)]

    def _run(self):
        while not self.stopping.is_set():
            try:
                pe = self.client.encode_positions(count=COUNT, dim=DIM)
                if not np.array_equal(pe, self.expected):
                    raise AssertionError("wrong encodings")
                with self.lock:
                    self.ok += 1
            except Exception as error:  # noqa: BLE001 - every failure counts
                with self.lock:
                    self.failures.append(repr(error))

    def start(self):
        for thread in self.threads:
            thread.start()
        return self

    def wait_for(self, calls, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.ok + len(self.failures) >= calls:
                    return
            time.sleep(0.005)
        raise AssertionError(f"load made fewer than {calls} calls in "
                             f"{timeout} s")

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=120)


class FailoverTest(unittest.TestCase):

    def assert_spread(self, counts, what):
        mean = sum(counts) / len(counts)
        self.assertGreater(mean, 0, what)
        for count in counts:
            self.assertLessEqual(abs(count / mean - 1), SPREAD,
                                 f"{what}: calls per replica {counts}")

    def test_sigterm_one_replica_under_load(self):
        servers = []
        for _ in range(REPLICAS):
            server = harness.Server(["--shutdown_grace_seconds=10",
                                     "--threads=1"])
            servers.append(server.start())
            self.addCleanup(server.__exit__, None, None, None)
        target = "ipv4:" + ",".join(s.target for s in servers)
        client = phasor_client.EncoderClient(
            target, load_balancing_policy="round_robin", deadline_seconds=30)
        self.addCleanup(client.close)
        expected = servers[0].client().encode_positions(count=COUNT, dim=DIM)

        # Until every replica has answered: round_robin connects to each
        # address in the background.
        deadline = time.monotonic() + 30
        while min(handled(s) for s in servers) == 0:
            self.assertLess(time.monotonic(), deadline,
                            "round_robin never reached every replica")
            client.encode_positions(count=COUNT, dim=DIM)

        # Phase 1: three live replicas share the load.
        before = [handled(s) for s in servers]
        load = Load(client, expected).start()
        load.wait_for(PHASE_CALLS)
        load.stop()
        self.assertEqual(load.failures, [])
        after = [handled(s) for s in servers]
        self.assert_spread([a - b for a, b in zip(after, before)],
                           "three replicas")

        # Phase 2: SIGTERM replica 2 mid-load; the load goes on.
        survivors, victim = servers[:2], servers[2]
        before = [handled(s) for s in survivors]
        load = Load(client, expected).start()
        load.wait_for(PHASE_CALLS // 4)
        victim_before_signal = handled(victim)
        calls_at_signal = load.ok + len(load.failures)
        victim.send_signal()
        self.assertEqual(victim.process.wait(timeout=60), 0, victim.log())
        load.wait_for(calls_at_signal + PHASE_CALLS)
        load.stop()
        self.assertEqual(load.failures, [],
                         f"{len(load.failures)} of "
                         f"{load.ok + len(load.failures)} calls failed")
        # The signal did land mid-load: the victim had served calls of this
        # phase, and the load carried on after it.
        self.assertGreater(victim_before_signal, after[2])
        self.assertGreaterEqual(load.ok, calls_at_signal + PHASE_CALLS)
        served = [handled(s) - b for s, b in zip(survivors, before)]
        self.assert_spread(served, "two survivors")

    def test_default_service_config_retries_a_draining_replica(self):
        # One file for every client: test_service_config.py compares the
        # C++, Python and Node clients' copies with it.
        parsed = json.loads(phasor_client.DEFAULT_SERVICE_CONFIG)
        method = parsed["methodConfig"][0]
        self.assertEqual(method["name"], [{"service": "phasor.v1.Encoder"}])
        self.assertEqual(method["retryPolicy"]["retryableStatusCodes"],
                         ["UNAVAILABLE", "CANCELLED", "RESOURCE_EXHAUSTED"])

if __name__ == "__main__":
    unittest.main()
