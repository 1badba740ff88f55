"""The Python package as a package, against a real phasor-server:

- installed offline into a fresh venv (--system-site-packages, pip
  --no-build-isolation --no-index) from a copy of the source tree, it
  imports from the venv, writes nothing at import (no stub cache), carries
  the default service config (client/service_config.json), and calls
  EncodePositions;
- it lives in ONE process with health stubs generated from the standard
  grpc/health/v1/health.proto: under the standard file name, and in
  grpcio-health-checking's grpc_health.v1 layout, imported before or after
  phasor_client; every set of stubs talks to the server;
- `python -m phasor_client` runs the CLI's common calls.

Every child process has a timeout; the server is stopped by pid.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np

import harness
import reference

FLOAT32_TOLERANCE = 2e-6
# pip builds the wheel (protoc included) on a loaded 2-core machine.
PIP_TIMEOUT_S = 240
CHILD_TIMEOUT_S = 60
HEALTH_PROTO = "/usr/share/grpc-proto/grpc/health/v1/health.proto"
PROTOC = shutil.which("protoc") or "/usr/bin/protoc"
GRPC_PYTHON_PLUGIN = (shutil.which("grpc_python_plugin")
                      or "/usr/bin/grpc_python_plugin")
SERVICE_CONFIG = os.path.join(harness.SOURCE_DIR, "client",
                              "service_config.json")


def _clean_env(**extra):
    """The environment without anything that could point Python at the
    build tree's copy of the package."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "E2E_PYTHON_DIR")
           and not k.startswith("PHASOR_")}
    env.update(extra)
    return env


def _run(command, **options):
    options.setdefault("timeout", CHILD_TIMEOUT_S)
    return subprocess.run(command, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False, **options)


class PythonPackageTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server().start()
        cls.scratch = tempfile.mkdtemp(prefix="phasor-pypkg-")

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.scratch, *parts)

    def assert_ok(self, result):
        self.assertEqual(result.returncode, 0,
                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")

    # -- (a) pip install into a fresh venv ----------------------------------

    def _source_copy(self, name="src"):
        """client/python, client/service_config.json, proto/ and the
        top-level CMakeLists.txt (the version) copied out, so pip's in-place
        build directories never land in the checkout and two build trees
        can run this test at once."""
        root = self.path(name)
        shutil.copytree(os.path.join(harness.SOURCE_DIR, "client", "python"),
                        os.path.join(root, "client", "python"),
                        ignore=shutil.ignore_patterns(
                            "build", "*.egg-info", "__pycache__"))
        shutil.copy(SERVICE_CONFIG, os.path.join(root, "client"))
        shutil.copytree(os.path.join(harness.SOURCE_DIR, "proto"),
                        os.path.join(root, "proto"))
        shutil.copy(os.path.join(harness.SOURCE_DIR, "CMakeLists.txt"), root)
        return os.path.join(root, "client", "python")

    def test_pip_install_into_fresh_venv_calls_server(self):
        venv = self.path("venv")
        self.assert_ok(_run([sys.executable, "-m", "venv",
                             "--system-site-packages", venv]))
        python = os.path.join(venv, "bin", "python")
        source = self._source_copy()
        # Offline: --no-index, and Debian's setuptools/wheel from the system
        # site-packages instead of an isolated build environment.
        self.assert_ok(_run([python, "-m", "pip", "install", "--no-index",
                             "--no-build-isolation", source],
                            env=_clean_env(), timeout=PIP_TIMEOUT_S))

        home = self.path("empty-home")
        os.makedirs(home)
        script = textwrap.dedent("""
            import json, os, sys
            import numpy as np
            import phasor_client
            from phasor_client import _stubs
            with phasor_client.EncoderClient(sys.argv[1]) as client:
                pe = client.encode_positions(count=16, dim=8)
                health = client.health()
            np.save(sys.argv[2], pe)
            print(json.dumps({"file": phasor_client.__file__,
                              "health_module": _stubs.health_pb2.__name__,
                              "health_file": _stubs.health_pb2.DESCRIPTOR.name,
                              "version": _stubs.PROJECT_VERSION,
                              "service_config": json.loads(
                                  phasor_client.DEFAULT_SERVICE_CONFIG),
                              "health": health}))
        """)
        out = self.path("venv-pe.npy")
        # cwd and HOME are empty directories: the package must come from
        # the venv and must not write a cache anywhere on import.
        result = _run([python, "-c", script, self.server.target, out],
                      cwd=home, env=_clean_env(HOME=home,
                                               XDG_CACHE_HOME=home))
        self.assert_ok(result)
        report = json.loads(result.stdout)
        self.assertTrue(report["file"].startswith(os.path.realpath(venv))
                        or report["file"].startswith(venv), report)
        self.assertEqual(report["health_module"],
                         "phasor_client._proto.grpc.health.v1.health_pb2")
        self.assertEqual(report["health_file"], "grpc/health/v1/health.proto")
        self.assertRegex(report["version"], r"^\d+\.\d+\.\d+$")
        self.assertEqual(report["health"], "SERVING")
        # The wheel carries the clients' default service config.
        with open(SERVICE_CONFIG, encoding="utf-8") as f:
            self.assertEqual(report["service_config"], json.load(f))
        self.assertEqual(os.listdir(home), [], "import wrote into $HOME")
        np.testing.assert_allclose(np.load(out),
                                   reference.sinusoid(np.arange(16), 8),
                                   rtol=0, atol=FLOAT32_TOLERANCE)

        # The installed CLI entry point too.
        result = _run([python, "-m", "phasor_client", "health",
                       "--target", self.server.target],
                      cwd=home, env=_clean_env(HOME=home))
        self.assert_ok(result)
        self.assertEqual(result.stdout.strip(), "server: SERVING")

    def test_system_wide_install_command(self):
        # docs/CLIENT.md's system-wide command, relocated under --root so the
        # test never writes into the machine's /usr/local.
        root = self.path("system-root")
        self.assert_ok(_run([sys.executable, "-m", "pip", "install",
                             "--break-system-packages", "--no-index",
                             "--no-build-isolation", "--no-deps",
                             "--root", root, self._source_copy("src-system")],
                            env=_clean_env(), timeout=PIP_TIMEOUT_S))
        found = [directory for directory, _, files in os.walk(root)
                 if directory.endswith("phasor_client") and
                 "__init__.py" in files]
        self.assertEqual(len(found), 1, found)
        site = os.path.dirname(found[0])
        result = _run([sys.executable, "-c",
                       "import sys, phasor_client\n"
                       "with phasor_client.EncoderClient(sys.argv[1]) as c:\n"
                       "    print(phasor_client.__file__, c.health())",
                       self.server.target],
                      env=_clean_env(PYTHONPATH=site), cwd=root)
        self.assert_ok(result)
        self.assertTrue(result.stdout.startswith(site), result.stdout)
        self.assertTrue(result.stdout.strip().endswith("SERVING"))

    # -- (b) one process with standard health stubs -------------------------

    def _protoc(self, include, proto, out):
        os.makedirs(out, exist_ok=True)
        self.assert_ok(_run([
            PROTOC, f"--plugin=protoc-gen-grpc_python={GRPC_PYTHON_PLUGIN}",
            f"--python_out={out}", f"--grpc_python_out={out}",
            f"-I{include}", proto]))

    def _run_with_package(self, script, *extra_path):
        env = _clean_env(PYTHONPATH=os.pathsep.join(
            [harness.PYTHON_DIR, *extra_path]))
        return _run([sys.executable, "-c", textwrap.dedent(script),
                     self.server.target], env=env, cwd=self.scratch)

    def test_coexists_with_grpc_health_layout_in_either_order(self):
        # grpcio-health-checking's layout (Debian 12 ships no such package):
        # the standard health.proto compiled as grpc_health/v1/health.proto.
        root = self.path("grpc-health")
        package = os.path.join(root, "grpc_health", "v1")
        os.makedirs(package)
        shutil.copy(HEALTH_PROTO, package)
        for directory in (os.path.dirname(package), package):
            open(os.path.join(directory, "__init__.py"), "w").close()
        self._protoc(root, "grpc_health/v1/health.proto", root)
        for first in ("grpc_health", "phasor_client"):
            with self.subTest(imported_first=first):
                script = f"""
                    import sys
                    import grpc
                    if {first!r} == "grpc_health":
                        from grpc_health.v1 import health_pb2, health_pb2_grpc
                        import phasor_client
                    else:
                        import phasor_client
                        from grpc_health.v1 import health_pb2, health_pb2_grpc
                    with grpc.insecure_channel(sys.argv[1]) as channel:
                        stub = health_pb2_grpc.HealthStub(channel)
                        reply = stub.Check(health_pb2.HealthCheckRequest(),
                                           timeout=30)
                        print(health_pb2.HealthCheckResponse.ServingStatus
                              .Name(reply.status))
                    with phasor_client.EncoderClient(sys.argv[1]) as client:
                        print(client.health())
                        print(client.encode_positions(count=3, dim=4).shape)
                        print(client.list_services())
                """
                result = self._run_with_package(script, root)
                self.assert_ok(result)
                lines = result.stdout.splitlines()
                self.assertEqual(lines[:3], ["SERVING", "SERVING", "(3, 4)"])
                self.assertIn("grpc.health.v1.Health", lines[3])

    def test_coexists_with_standard_file_name_stubs(self):
        # protoc -I/usr/share/grpc-proto grpc/health/v1/health.proto: the
        # file name phasor_client registers too. The module path grpc/...
        # would shadow grpcio's own package, so it is loaded by file path.
        out = self.path("standard-health")
        self._protoc(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(HEALTH_PROTO)))), "grpc/health/v1/health.proto",
            out)
        messages = os.path.join(out, "grpc", "health", "v1", "health_pb2.py")
        script = f"""
            import importlib.util, sys
            import grpc
            import phasor_client
            spec = importlib.util.spec_from_file_location(
                "standard_health_pb2", {messages!r})
            health_pb2 = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(health_pb2)
            with grpc.insecure_channel(sys.argv[1]) as channel:
                check = channel.unary_unary(
                    "/grpc.health.v1.Health/Check",
                    request_serializer=
                        health_pb2.HealthCheckRequest.SerializeToString,
                    response_deserializer=
                        health_pb2.HealthCheckResponse.FromString)
                reply = check(health_pb2.HealthCheckRequest(), timeout=30)
                print(health_pb2.HealthCheckResponse.ServingStatus.Name(
                    reply.status))
            with phasor_client.EncoderClient(sys.argv[1]) as client:
                print(client.health())
        """
        result = self._run_with_package(script)
        self.assert_ok(result)
        self.assertEqual(result.stdout.split(), ["SERVING", "SERVING"])

    # -- (c) python -m phasor_client ----------------------------------------

    def module_cli(self, *args):
        return _run([sys.executable, "-m", "phasor_client", *map(str, args),
                     "--target", self.server.target],
                    env=_clean_env(PYTHONPATH=harness.PYTHON_DIR),
                    cwd=self.scratch)

    def test_module_health(self):
        result = self.module_cli("health")
        self.assert_ok(result)
        self.assertEqual(result.stdout.strip(), "server: SERVING")
        # Flags before the command work as with phasor-client.
        result = _run([sys.executable, "-m", "phasor_client", "--target",
                       self.server.target, "health"],
                      env=_clean_env(PYTHONPATH=harness.PYTHON_DIR))
        self.assert_ok(result)
        self.assertEqual(result.stdout.strip(), "server: SERVING")

    def test_module_encode_positions_to_npy(self):
        out = self.path("pe.npy")
        self.assert_ok(self.module_cli("encode-positions", "--count", 8,
                                       "--dim", 16, "--out", out))
        np.testing.assert_allclose(np.load(out),
                                   reference.sinusoid(np.arange(8), 16),
                                   rtol=0, atol=FLOAT32_TOLERANCE)
        printed = self.module_cli("encode-positions", "--count", 2,
                                  "--dim", 4)
        self.assert_ok(printed)
        self.assertIn("encodings: float32 (2, 4)", printed.stdout)

    def test_module_encode_observations_from_csv(self):
        timestamps = np.array([0, 60, 180, 300], dtype=np.int64) * 10**9 \
            + 1_700_000_000 * 10**9
        values = np.array([[1.0, np.nan], [2.0, 5.0], [np.nan, 6.0],
                           [4.0, np.nan]])
        ts_csv, values_csv = self.path("t.csv"), self.path("v.csv")
        with open(ts_csv, "w", encoding="utf-8") as f:
            f.write("".join(f"{t}\n" for t in timestamps))
        with open(values_csv, "w", encoding="utf-8") as f:
            f.write("".join(",".join("" if np.isnan(v) else repr(v)
                                     for v in row) + "\n" for row in values))
        out = self.path("features.npy")
        result = self.module_cli(
            "encode-observations", "--timestamps", ts_csv, "--values",
            values_csv, "--spec",
            "temporal { gaps { global_delta: true per_channel_delta: true } }",
            "--out", out)
        self.assert_ok(result)
        features = np.load(out)
        offsets_s = (timestamps - timestamps[0]) / 1e9
        global_delta = np.diff(offsets_s, prepend=offsets_s[0])[:, None]
        deltas = reference.channel_deltas(timestamps, ~np.isnan(values))
        np.testing.assert_allclose(
            features, np.concatenate([global_delta, deltas], axis=1),
            rtol=1e-6, atol=1e-6)
        self.assertIn("gaps", result.stdout)
        # The same from .npy files.
        np.save(self.path("t.npy"), timestamps)
        np.save(self.path("v.npy"), values)
        result = self.module_cli(
            "encode-observations", "--timestamps", self.path("t.npy"),
            "--values", self.path("v.npy"), "--spec",
            "temporal { gaps { global_delta: true per_channel_delta: true } }",
            "--out", self.path("features2.npy"))
        self.assert_ok(result)
        np.testing.assert_array_equal(np.load(self.path("features2.npy")),
                                      features)

    def test_module_describe_and_list_profiles(self):
        result = self.module_cli("describe", "--dim", 8)
        self.assert_ok(result)
        self.assertIn("frequency ladder (4 pairs, unit: positions)",
                      result.stdout)
        self.assertIn("unambiguous range:", result.stdout)
        result = self.module_cli("list-profiles")
        self.assert_ok(result)
        self.assertIn("no profiles", result.stdout)

    def test_module_errors_exit_codes(self):
        bad = self.module_cli("encode-positions", "--count", 4, "--dim", 7)
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        self.assertIn("INVALID_ARGUMENT", bad.stderr)
        self.assertIn("dim", bad.stderr)
        usage = self.module_cli("no-such-command")
        self.assertEqual(usage.returncode, 2, usage.stdout + usage.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
