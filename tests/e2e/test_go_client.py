"""The Go example (client/go/main.go, built offline by CMake's
phasor_go_example with Debian's Go packages) against a real phasor-server:
it checks EncodePositions, ApplyRope and EncodeObservations against the
formulas it computes itself and exits 0 only when every value matches.

Environment (tests/e2e/CMakeLists.txt): E2E_GO_EXAMPLE, the built binary;
E2E_SERVER_BIN and E2E_SOURCE_DIR as for every e2e test."""

import os
import shutil
import subprocess
import unittest

import harness

GO_EXAMPLE = os.environ.get("E2E_GO_EXAMPLE", "phasor-go-example")


class GoExampleTest(harness.ServerTestCase):

    def run_example(self, *args):
        return subprocess.run([GO_EXAMPLE, *args], capture_output=True,
                              text=True, timeout=120,
                              stdin=subprocess.DEVNULL, check=False)

    def test_numbers_match_the_formulas(self):
        # dns:/// as for a headless Service (the example dials with
        # round_robin); an IP literal resolves to itself.
        result = self.run_example("-target", f"dns:///{self.server.target}")
        self.assertEqual(result.returncode, 0,
                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        self.assertEqual(result.stderr, "")
        lines = result.stdout.splitlines()
        self.assertIn("health: SERVING", lines)
        self.assertIn("services: [grpc.health.v1.Health "
                      "grpc.reflection.v1alpha.ServerReflection "
                      "inference.GRPCInferenceService "
                      "phasor.v1.Encoder]", lines)
        for dtype in ("FLOAT32", "FLOAT16", "BFLOAT16"):
            self.assertTrue(any(line.startswith(f"EncodePositions {dtype}: "
                                                f"[6,8]") for line in lines),
                            lines)
        self.assertIn("schema: time columns [0, 6)", lines)
        self.assertIn("dim 7: InvalidArgument [spec.positional.sinusoidal."
                      "dim: must be even and > 0, got 7]", lines)
        self.assertEqual(lines[-1], "all values match the formulas")

    def test_unreachable_server_fails(self):
        # Nothing listens on a fresh free port: the example must fail, not
        # report success.
        result = self.run_example("-target",
                                  f"127.0.0.1:{harness.free_port()}",
                                  "-deadline", "2s")
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("Health.Check", result.stderr)

    def test_gofmt_clean(self):
        gofmt = shutil.which("gofmt") or "/usr/lib/go/bin/gofmt"
        source = os.path.join(harness.SOURCE_DIR, "client", "go")
        result = subprocess.run([gofmt, "-l", source], capture_output=True,
                                text=True, timeout=60, check=True)
        self.assertEqual(result.stdout, "", "run gofmt -w client/go")


if __name__ == "__main__":
    unittest.main(verbosity=2)
