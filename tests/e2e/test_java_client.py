"""The Java example (tests/e2e/java/PhasorJavaExample.java, built offline
by CMake's phasor_java_example with Debian's grpc-java) against a real
phasor-server: it checks EncodePositions, ApplyRope and EncodeObservations
against the formulas it computes itself and exits 0 only when every value
matches.

Environment (tests/e2e/CMakeLists.txt): E2E_JAVA, the java launcher;
E2E_JAVA_CLASSPATH, the example's classes and Debian's jars."""

import os
import subprocess
import unittest

import harness

JAVA = os.environ.get("E2E_JAVA", "java")
CLASSPATH = os.environ.get("E2E_JAVA_CLASSPATH", "")


class JavaExampleTest(harness.ServerTestCase):

    def run_example(self, target):
        return subprocess.run([JAVA, "-cp", CLASSPATH, "PhasorJavaExample",
                               target], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL,
                              check=False)

    def test_numbers_match_the_formulas(self):
        # dns:/// with round_robin, as for a headless Service.
        result = self.run_example(f"dns:///{self.server.target}")
        self.assertEqual(result.returncode, 0,
                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        lines = result.stdout.splitlines()
        self.assertIn("health: SERVING", lines)
        for dtype in ("FLOAT32", "FLOAT16", "BFLOAT16"):
            self.assertTrue(any(line.startswith(f"EncodePositions {dtype}: "
                                                f"[6,8]") for line in lines),
                            lines)
        self.assertIn("EncodeObservations: schema time width 6", lines)
        self.assertIn("dim 7: INVALID_ARGUMENT [spec.positional.sinusoidal."
                      "dim: must be even and > 0, got 7]", lines)
        self.assertEqual(lines[-1], "all values match the formulas")

    def test_unreachable_server_fails(self):
        result = self.run_example(f"127.0.0.1:{harness.free_port()}")
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn("UNAVAILABLE", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
