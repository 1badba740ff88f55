"""The container image, built and run by the project's own test, with
Debian's tools and no registry or Docker engine.

deploy/container/build-image.sh builds debian:bookworm and
debian:bookworm-slim with debootstrap + buildah and then the repository's
Dockerfile (buildah bud, chroot isolation, docker format). This test then
checks the image's configuration (user, entrypoint, ports, environment,
HEALTHCHECK), the slim runtime base (no manuals or documentation besides
copyright files), mounts the image's root filesystem and starts the
ENTRYPOINT in it as the image does — `chroot --userspec=10001:10001`, the
image's environment — on free loopback ports; answers it with the image's
own phasor-client (health, the HEALTHCHECK command, encode-positions),
scrapes /metrics, and stops it with SIGTERM, expecting exit status 0.

Needs root, debootstrap and buildah (deploy/install-deps.sh --test); a
missing tool fails the test. The work directory (debootstrap base archive,
buildah's vfs storage with its layer cache) is E2E_CONTAINER_DIR, under the
build tree, so reruns skip the debootstrap and the apt installs.
"""

import json
import math
import os
import shutil
import signal
import subprocess
import time
import unittest
import urllib.request

import harness

WORK_DIR = os.environ.get("E2E_CONTAINER_DIR",
                          os.path.join(harness.SOURCE_DIR, "build",
                                       "container"))
TAG = "localhost/phasor:test"
BUILD_SCRIPT = os.path.join(harness.SOURCE_DIR, "deploy", "container",
                            "build-image.sh")
UID = 10001


def buildah(*args, check=True):
    return subprocess.run(
        ["buildah", "--root", os.path.join(WORK_DIR, "storage"),
         "--runroot", os.path.join(WORK_DIR, "run"), "--storage-driver",
         "vfs", *args], capture_output=True, text=True, check=check,
        stdin=subprocess.DEVNULL, timeout=600)


class ContainerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        for tool in ("debootstrap", "buildah", "chroot", "unshare"):
            if shutil.which(tool) is None:
                raise AssertionError(f"{tool} not found: bash "
                                     f"deploy/install-deps.sh --test")
        if os.geteuid() != 0:
            raise AssertionError("building and running the image needs root "
                                 "(debootstrap, buildah vfs, chroot)")
        started = time.monotonic()
        build = subprocess.run(["bash", BUILD_SCRIPT, WORK_DIR, TAG],
                               capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=3000)
        cls.build_seconds = time.monotonic() - started
        if build.returncode != 0:
            raise AssertionError(f"build-image.sh failed "
                                 f"({build.returncode}):\n"
                                 f"{build.stdout[-6000:]}\n"
                                 f"{build.stderr[-6000:]}")
        print(f"image built in {cls.build_seconds:.0f} s", flush=True)
        cls.config = json.loads(buildah("inspect", "--type", "image",
                                        TAG).stdout)
        cls.container = buildah("from", "--pull=never", TAG).stdout.strip()
        cls.root = buildah("mount", cls.container).stdout.strip()

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "container", None):
            buildah("umount", cls.container, check=False)
            buildah("rm", cls.container, check=False)

    # -- the image as data -------------------------------------------------

    def docker_config(self):
        return self.config["Docker"]["config"]

    def test_image_config(self):
        self.assertEqual(self.config["Docker"]["os"], "linux")
        config = self.docker_config()
        self.assertEqual(config["User"], f"{UID}:{UID}")
        self.assertEqual(config["Entrypoint"],
                         ["/usr/local/bin/phasor-server"])
        self.assertEqual(sorted(config["ExposedPorts"]),
                         ["50051/tcp", "9464/tcp"])
        self.assertEqual(config["StopSignal"], "SIGTERM")
        self.assertIn("PHASOR_GRPC_ADDRESS=0.0.0.0:50051", config["Env"])
        # Kept because the image is built in docker format.
        health = config["Healthcheck"]
        self.assertEqual(health["Test"][0], "CMD")
        self.assertEqual(health["Test"][1], "/usr/local/bin/phasor-client")

    def test_runtime_stage_is_slim_and_complete(self):
        root = self.root
        for tool in ("phasor-server", "phasor-client"):
            self.assertTrue(os.access(os.path.join(root, "usr/local/bin",
                                                   tool), os.X_OK), tool)
        # The slim base's dpkg excludes held for the runtime packages too.
        self.assertTrue(os.path.exists(os.path.join(
            root, "etc/dpkg/dpkg.cfg.d/docker")))
        man = os.path.join(root, "usr/share/man")
        self.assertEqual([f for _, _, files in os.walk(man) for f in files],
                         [])
        doc = os.path.join(root, "usr/share/doc")
        stray = [os.path.join(d, f) for d, _, files in os.walk(doc)
                 for f in files if f != "copyright"]
        self.assertEqual(stray, [])
        self.assertTrue(os.path.exists(os.path.join(
            doc, "libgrpc++1.51", "copyright")))
        # No compiler or build tree came along from the builder stage.
        self.assertFalse(os.path.exists(os.path.join(root, "usr/bin/g++")))
        self.assertFalse(os.path.exists(os.path.join(root, "src")))
        # IANA zones for calendar features.
        self.assertTrue(os.path.exists(os.path.join(
            root, "usr/share/zoneinfo/Europe/Berlin")))
        # The built-in holiday calendars, where the server looks by default.
        self.assertTrue(os.path.exists(os.path.join(
            root, "usr/local/share/phasor/builtin_holidays.textpb")))

    # -- the image running -------------------------------------------------

    def in_image(self, argv, env, **popen):
        """argv run as the image runs it: chrooted into its root as its
        user, only its environment, in a private mount namespace holding a
        /proc (gone with the process). exec keeps one pid throughout, so a
        signal to it reaches phasor-server."""
        script = ('mount -t proc proc "$1/proc" && root="$1" && shift && '
                  'exec chroot --userspec=10001:10001 "$root" "$@"')
        return subprocess.Popen(
            ["unshare", "--mount", "--", "sh", "-c", script, "sh", self.root,
             *argv],
            env=env, stdin=subprocess.DEVNULL, **popen)

    def run_in_image(self, argv, env):
        process = self.in_image(argv, env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, err = process.communicate(timeout=harness.CLIENT_TIMEOUT_S)
        return process.returncode, out, err

    def test_serves_and_drains(self):
        config = self.docker_config()
        env = dict(e.split("=", 1) for e in config["Env"])
        port, metrics_port = harness.free_port(), harness.free_port()
        target = f"--target=127.0.0.1:{port}"
        # /dev/null, /dev/urandom as a runtime would provide them.
        dev = os.path.join(self.root, "dev")
        for name, major, minor in (("null", 1, 3), ("zero", 1, 5),
                                   ("random", 1, 8), ("urandom", 1, 9)):
            path = os.path.join(dev, name)
            if not os.path.exists(path):
                os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))
                os.chmod(path, 0o666)
        log_path = os.path.join(WORK_DIR, "server.log")
        with open(log_path, "w+") as log:
            server = self.in_image(
                [*config["Entrypoint"],
                 f"--grpc_address=127.0.0.1:{port}",
                 f"--metrics_address=127.0.0.1:{metrics_port}"],
                env, stdout=log, stderr=subprocess.STDOUT)
            try:
                self._check_server(server, env, target, port, metrics_port,
                                   log)
                server.send_signal(signal.SIGTERM)
                self.assertEqual(server.wait(timeout=harness.STOP_TIMEOUT_S),
                                 0)
                log.seek(0)
                self.assertIn("stopped", log.read())
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait(timeout=30)

    def _check_server(self, server, env, target, port, metrics_port, log):
        client = ["/usr/local/bin/phasor-client", target]
        deadline = time.monotonic() + harness.STARTUP_TIMEOUT_S
        while True:
            if server.poll() is not None:
                log.seek(0)
                self.fail(f"phasor-server exited {server.returncode}:\n"
                          f"{log.read()}")
            code, out, err = self.run_in_image([*client, "health"], env)
            if code == 0:
                break
            self.assertLess(time.monotonic(), deadline, out + err)
            time.sleep(0.2)
        self.assertEqual(out.strip(), "server: SERVING")
        # It runs as the image's user, not root.
        with open(f"/proc/{server.pid}/status") as status:
            uids = [line.split()[1:] for line in status
                    if line.startswith("Uid:")][0]
        self.assertEqual(set(uids), {str(UID)})
        # The HEALTHCHECK command as written, aimed at this test's port
        # (a later --target wins).
        health = self.docker_config()["Healthcheck"]["Test"][1:]
        code, out, err = self.run_in_image([*health, target], env)
        self.assertEqual(code, 0, out + err)

        code, out, err = self.run_in_image(
            [*client, "encode-positions", "--count", "4", "--dim", "8"], env)
        self.assertEqual(code, 0, err)
        lines = out.strip().splitlines()
        self.assertEqual(lines[0], "encodings: float32 [4,8]")
        rows = [[float(x) for x in line.split()[1:]] for line in lines[2:]]
        self.assertEqual(len(rows), 4)
        for position, row in enumerate(rows):
            self.assertEqual(len(row), 8)
            for k in range(4):
                angle = position * 10000.0 ** (-2 * k / 8)
                self.assertAlmostEqual(row[2 * k], math.sin(angle), places=5)
                self.assertAlmostEqual(row[2 * k + 1], math.cos(angle),
                                       places=5)

        with urllib.request.urlopen(
                f"http://127.0.0.1:{metrics_port}/metrics",
                timeout=10) as response:
            samples = harness.parse_metrics(response.read().decode())
        self.assertEqual(harness.metric_value(
            samples, "grpc_server_handled_total", grpc_method="EncodePositions",
            grpc_code="OK"), 1)
        self.assertGreaterEqual(harness.metric_value(
            samples, "phasor_encoded_values_total"), 32)


if __name__ == "__main__":
    unittest.main()
