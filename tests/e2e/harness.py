"""Shared pieces of the end-to-end tests: a real phasor-server on loopback.

Each test starts the phasor-server binary itself on free 127.0.0.1 ports
(or, with Server(unix_socket=PATH), gRPC on a Unix-domain socket),
waits until grpc.health.v1 says SERVING (polling for at most
STARTUP_TIMEOUT_S), and stops it by its pid. Every wait is bounded, every
RPC has a deadline, and a server still alive at the end is killed, so no test
can hang or leave a process behind.

Environment (set by tests/e2e/CMakeLists.txt):
  E2E_SERVER_BIN   path of phasor-server
  E2E_CLIENT_BIN   path of phasor-client
  E2E_SOURCE_DIR   repository root (for client/python and deploy/)
  E2E_PYTHON_DIR   the build tree's python/ directory: phasor_client with
                   the stubs CMake's phasor_python target generated
                   (default: <source>/build/python)
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

SOURCE_DIR = os.environ.get(
    "E2E_SOURCE_DIR",
    os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
SERVER_BIN = os.environ.get("E2E_SERVER_BIN", "phasor-server")
CLIENT_BIN = os.environ.get("E2E_CLIENT_BIN", "phasor-client")

# The package as built (stubs generated at build time), not the source
# directory, which has no stubs.
PYTHON_DIR = os.environ.get("E2E_PYTHON_DIR",
                            os.path.join(SOURCE_DIR, "build", "python"))
sys.path.insert(0, PYTHON_DIR)
import phasor_client  # noqa: E402

# A loaded 2-core machine may take a while to start a process.
STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 60.0
LOOPBACK = "127.0.0.1"


def free_port():
    """A port that was free a moment ago (bind to 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


class ServerError(RuntimeError):
    pass


class Server:
    """A phasor-server process on loopback ports.

    with Server(["--enable_echo"]) as server:
        client = server.client()
    """

    def __init__(self, flags=(), env=None, client_options=None,
                 metrics=True, launcher=(), unix_socket=None):
        self.flags = list(flags)
        # A path: gRPC listens on that Unix-domain socket
        # (--grpc_address=unix:PATH) instead of a loopback port.
        self.unix_socket = unix_socket
        # Words run before the server's own command line, which they must
        # exec (so the pid stays the server's): e.g. a shell that moves
        # itself into a cgroup first.
        self.launcher = list(launcher)
        self.extra_env = dict(env or {})
        # EncoderClient keyword arguments for the health poll (TLS, ...).
        self.client_options = dict(client_options or {})
        self.with_metrics = metrics
        self.process = None
        self.port = None
        self.metrics_port = None
        self._log = None

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        last_error = None
        # Another process may grab a port between free_port() and bind: retry
        # with fresh ports when the server exits during startup.
        for _ in range(3):
            try:
                self._spawn()
                self._wait_serving()
                return self
            except ServerError as error:
                exited = self.process.poll() is not None
                self.kill()
                if not exited:  # Alive but never SERVING: retrying won't help.
                    raise
                last_error = error
        raise last_error

    def _spawn(self):
        self.port = None if self.unix_socket else free_port()
        self.metrics_port = free_port() if self.with_metrics else None
        address = (f"unix:{self.unix_socket}" if self.unix_socket
                   else f"{LOOPBACK}:{self.port}")
        flags = [f"--grpc_address={address}",
                 f"--metrics_address={LOOPBACK}:{self.metrics_port}"
                 if self.with_metrics else "--metrics_address="]
        # Only this test's settings: no PHASOR_* leaks in from outside.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PHASOR_")}
        env.update(self.extra_env)
        self._log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [*self.launcher, SERVER_BIN, *flags, *self.flags], stdout=self._log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def _check_alive(self):
        if self.process.poll() is not None:
            raise ServerError(
                f"phasor-server exited with {self.process.returncode} during "
                f"startup:\n{self.log()}")

    def _wait_serving(self):
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        # Wait for the port with plain TCP first: a gRPC channel refused once
        # backs off for a second or more before it tries again.
        while True:
            self._check_alive()
            try:
                if self.unix_socket:
                    with socket.socket(socket.AF_UNIX) as probe:
                        probe.settimeout(1)
                        probe.connect(self.unix_socket)
                else:
                    socket.create_connection((LOOPBACK, self.port),
                                             timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise ServerError(f"phasor-server not listening after "
                                      f"{STARTUP_TIMEOUT_S} s:\n{self.log()}")
                time.sleep(0.02)
        client = self.client(deadline_seconds=2.0)
        try:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    if client.health() == "SERVING":
                        return
                except Exception:  # Listening, not yet SERVING.
                    pass
                time.sleep(0.05)
        finally:
            client.close()
        raise ServerError(f"phasor-server not SERVING after "
                          f"{STARTUP_TIMEOUT_S} s:\n{self.log()}")

    def send_signal(self, signal_number=signal.SIGTERM):
        os.kill(self.process.pid, signal_number)

    def stop(self, signal_number=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Signals the server and returns its exit code."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.send_signal(signal_number)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ServerError(f"phasor-server still running {timeout} s after "
                              f"signal {signal_number}:\n{self.log()}")

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_S)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        try:
            self.stop()
        finally:
            self.kill()
            if self._log is not None:
                self._log.close()

    # -- talking to it -----------------------------------------------------

    @property
    def target(self):
        if self.unix_socket:
            return f"unix:{self.unix_socket}"
        return f"{LOOPBACK}:{self.port}"

    def client(self, **options):
        merged = dict(self.client_options)
        merged.update(options)
        return phasor_client.EncoderClient(self.target, **merged)

    def metrics(self):
        url = f"http://{LOOPBACK}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()

    def log(self):
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()


def run_client(*args, timeout=CLIENT_TIMEOUT_S, env=None):
    """Runs phasor-client, with `env` added to the environment; returns the
    CompletedProcess (never raises on a non-zero exit, so tests can assert on
    failures)."""
    return subprocess.run([CLIENT_BIN, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          check=False, env={**os.environ, **(env or {})})


def parse_metrics(text):
    """Prometheus text format -> {(name, frozenset(labels.items())): value}."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_and_labels, _, value = line.rpartition(" ")
        labels = {}
        name = name_and_labels
        if "{" in name_and_labels:
            name, _, label_text = name_and_labels.partition("{")
            label_text = label_text.rstrip("}")
            for part in _split_labels(label_text):
                key, _, quoted = part.partition("=")
                labels[key.strip()] = quoted.strip().strip('"')
        samples[(name, frozenset(labels.items()))] = float(value)
    return samples


def _split_labels(text):
    """Splits a="x",b="y,z" on commas outside quotes."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    if current:
        parts.append(current)
    return parts


def metric_value(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total, found = 0.0, False
    for (sample_name, sample_labels), value in samples.items():
        if sample_name != name:
            continue
        label_dict = dict(sample_labels)
        if all(label_dict.get(k) == v for k, v in labels.items()):
            total += value
            found = True
    return total if found else None


def violation(error):
    """The field of the google.rpc.BadRequest detail of an RpcError, or
    None."""
    stubs = phasor_client._stubs
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = stubs.status_pb2.Status.FromString(value)
            for detail in status.details:
                bad = stubs.error_details_pb2.BadRequest()
                if detail.Unpack(bad) and bad.field_violations:
                    return bad.field_violations[0].field
    return None


def native_tensor(array, dtype):
    """A phasor.v1.Tensor of `array`'s bytes as `dtype` (a v1.DType)."""
    import numpy as np
    array = np.ascontiguousarray(array)
    return phasor_client._stubs.encoder_pb2.Tensor(
        shape=list(array.shape), dtype=dtype, data=array.tobytes())


class ServerTestCase(unittest.TestCase):
    """A test class with one server of its own for all its tests.

    cls.server runs for the whole class; when CLIENT_DEADLINE_SECONDS is set,
    cls.client is a Python client of it with that deadline (else None).
    """

    CLIENT_DEADLINE_SECONDS = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server().start()
        cls.client = None
        if cls.CLIENT_DEADLINE_SECONDS is not None:
            cls.client = cls.server.client(
                deadline_seconds=cls.CLIENT_DEADLINE_SECONDS)

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.client is not None:
                cls.client.close()
        finally:
            cls.server.__exit__(None, None, None)
