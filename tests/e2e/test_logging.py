"""phasor-server's log lines, end to end: with --log_format=json every line
on stderr is one JSON object; the first says the effective configuration,
each failed call gets a record (method, code, peer, duration, message) under
a rate limit that counts what it dropped, --access_log records every call,
and the default text format carries the same keys as logfmt."""

import json
import os
import subprocess
import tempfile
import time
import unittest

import grpc

import harness

METHOD = "/phasor.v1.Encoder/EncodePositions"


def json_lines(server):
    """Every line the server wrote, each parsed as JSON (a line that is not
    one JSON object fails the test)."""
    records = []
    for line in server.log().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise AssertionError(f"not a JSON line: {line!r}: {error}")
        if not isinstance(record, dict):
            raise AssertionError(f"not a JSON object: {line!r}")
        records.append(record)
    return records


def wait_for_records(server, predicate, count, timeout=10):
    """Polls the log until `count` records satisfy `predicate` (a call is
    logged as its status is sent, which may trail the client a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in json_lines(server) if predicate(r)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def is_call(record):
    return record.get("event") == "call"


def fail_once(client):
    with_error = None
    try:
        client.encode_positions(count=4, dim=7)  # dim must be even
    except grpc.RpcError as error:
        with_error = error
    assert with_error is not None and \
        with_error.code() == grpc.StatusCode.INVALID_ARGUMENT, with_error


class JsonLogTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        profiles = os.path.join(cls.tmp.name, "profiles.textproto")
        with open(profiles, "w") as f:
            f.write('profile { name: "sin16" spec { positional { sinusoidal '
                    '{ dim: 16 } } } }\n'
                    'profile { name: "sin32" spec { positional { sinusoidal '
                    '{ dim: 32 } } } }\n')
        token = os.path.join(cls.tmp.name, "token")
        with open(token, "w") as f:
            f.write("s3cret\n")
        cls.profiles_path = profiles
        cls.started = time.time()
        # A burst of 5, then one line per 2 s: the rate-limit test below
        # fails 40 calls well within one refill.
        cls.server = harness.Server(
            ["--log_format=json", "--profiles", profiles,
             "--auth_token_file", token, "--failed_call_log_burst=5",
             "--failed_call_logs_per_second=0.5", "--max_message_bytes=8388608"],
            client_options={"token": "s3cret"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def test_1_config_record_first(self):
        records = json_lines(self.server)
        self.assertTrue(records)
        config = records[0]
        self.assertEqual(config["event"], "config")
        self.assertEqual(config["level"], "info")
        self.assertRegex(config["time"],
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertEqual(config["grpc_address"], self.server.target)
        self.assertEqual(config["grpc_port"], self.server.port)
        self.assertEqual(config["metrics_port"], self.server.metrics_port)
        self.assertEqual(config["max_message_bytes"], 8 << 20)
        self.assertEqual(config["max_elements_per_request"], 1 << 24)
        self.assertEqual(config["tls"], "off")
        self.assertIs(config["auth_token_required"], True)
        self.assertEqual(config["profiles_file"], self.profiles_path)
        self.assertEqual(config["profiles"], ["sin16", "sin32"])
        self.assertEqual(config["log_format"], "json")
        self.assertIs(config["access_log"], False)
        self.assertEqual(config["failed_call_log_burst"], 5)
        self.assertNotIn("s3cret", self.server.log())  # Paths, never secrets.
        self.assertEqual(records[1]["event"], "serving")

    def test_2_failed_call_record_then_rate_limit(self):
        with self.server.client(deadline_seconds=10) as client:
            client.encode_positions(count=4, dim=8)  # OK: not logged.
            fail_once(client)
            [record] = wait_for_records(self.server, is_call, 1)
            self.assertEqual(record["level"], "warning")
            self.assertEqual(record["method"], METHOD)
            self.assertEqual(record["code"], "INVALID_ARGUMENT")
            self.assertRegex(record["peer"], r"^ipv4:127\.0\.0\.1:\d+$")
            self.assertGreater(record["duration_seconds"], 0)
            self.assertLess(record["duration_seconds"], 10)
            self.assertIn("dim", record["message"])
            self.assertLessEqual(len(record["message"]), 256)
            self.assertEqual(record["suppressed"], 0)

            # 40 more failures at once: the 4 tokens left pass, the rest
            # are dropped (a refill takes 2 s; allow one if the machine is
            # slow enough to span it).
            began = time.monotonic()
            for _ in range(40):
                fail_once(client)
            took = time.monotonic() - began
            time.sleep(0.5)
            logged = [r for r in json_lines(self.server) if is_call(r)]
            self.assertGreaterEqual(len(logged), 5)
            self.assertLessEqual(len(logged), 5 + int(took / 2) + 1, took)

            # After a refill, the next failure is logged with the count of
            # the ones dropped since the last line.
            time.sleep(2.2)
            fail_once(client)
            calls = wait_for_records(self.server, is_call, len(logged) + 1)
            self.assertEqual(len(calls), len(logged) + 1)
            self.assertEqual(calls[-1]["suppressed"], 1 + 40 + 1 - len(calls))
            self.assertGreater(calls[-1]["suppressed"], 30)

        # An unauthenticated call is a failed call like any other.
        with self.server.client(deadline_seconds=10, token="wrong") as bad:
            time.sleep(2.2)
            with self.assertRaises(grpc.RpcError):
                bad.encode_positions(count=4, dim=8)
        last = wait_for_records(
            self.server, lambda r: is_call(r) and r["code"] == "UNAUTHENTICATED", 1)
        self.assertEqual(len(last), 1)

    def test_3_shutdown_records(self):
        server = harness.Server(["--log_format=json"]).start()
        try:
            self.assertEqual(server.stop(), 0)
            events = [r["event"] for r in json_lines(server)]
        finally:
            server.__exit__(None, None, None)
        self.assertEqual(events, ["config", "serving", "draining", "stopped"])


class AccessAndTextLogTest(unittest.TestCase):

    def test_access_log_in_text_format(self):
        # PHASOR_ACCESS_LOG is the flag's environment twin.
        with harness.Server(env={"PHASOR_ACCESS_LOG": "true"}) as server:
            with server.client(deadline_seconds=10) as client:
                client.encode_positions(count=4, dim=8)
                with self.assertRaises(grpc.RpcError):
                    client.encode_positions(count=4, dim=7)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                lines = server.log().splitlines()
                calls = [l for l in lines if " event=call " in l and METHOD in l]
                if len(calls) >= 2:
                    break
                time.sleep(0.05)
        for line in lines:
            self.assertRegex(line, r"^time=\S+Z level=(info|warning|error) event=\w+")
        self.assertIn("access_log=true", lines[0])
        self.assertIn(" event=config ", lines[0])
        self.assertEqual(len(calls), 2, lines)
        ok, failed = calls
        self.assertRegex(ok, r" level=info event=call method=\S+ code=OK "
                             r"peer=ipv4:127\.0\.0\.1:\d+ duration_seconds=[\d.e-]+$")
        self.assertRegex(failed, r" level=warning .* code=INVALID_ARGUMENT .* message=\".*dim")
        # Health polls of the harness are calls too, logged as OK.
        self.assertTrue(any("/grpc.health.v1.Health/Check" in l for l in lines))

    def test_bad_log_format_is_refused(self):
        result = subprocess.run(
            [harness.SERVER_BIN, "--log_format=yaml", "--grpc_address=127.0.0.1:0",
             "--metrics_address="], capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL, check=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn('must be text or json, got "yaml"', result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
