"""Bearer-token auth: a missing or wrong token is UNAUTHENTICATED, the right
one is served, and health checks stay open for probes."""

import os
import tempfile
import unittest

import grpc
import numpy as np

import harness
import reference

TOKEN = "e2e-7f3c9a51-token"


class AuthTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.right = os.path.join(cls.tmp.name, "right.token")
        cls.wrong = os.path.join(cls.tmp.name, "wrong.token")
        with open(cls.right, "w") as f:
            f.write(TOKEN + "\n")
        with open(cls.wrong, "w") as f:
            f.write(TOKEN[:-1] + "X\n")
        cls.server = harness.Server(["--auth_token_file", cls.right]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def cli(self, *token_flags):
        return harness.run_client("--target", self.server.target,
                                  *token_flags, "encode-positions", "--count",
                                  2, "--dim", 4)

    def test_cli_missing_and_wrong_token_rejected(self):
        for flags in ((), ("--token_file", self.wrong)):
            result = self.cli(*flags)
            self.assertEqual(result.returncode, 1, result.stdout)
            self.assertIn("UNAUTHENTICATED", result.stderr)

    def test_cli_right_token_accepted(self):
        result = self.cli("--token_file", self.right)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("float32 [2,4]", result.stdout)

    def test_python_tokens(self):
        for options in ({}, {"token": "nope"}, {"token_file": self.wrong}):
            with self.server.client(**options) as client:
                with self.assertRaises(grpc.RpcError) as raised:
                    client.encode_positions(count=2, dim=4)
                self.assertEqual(raised.exception.code(),
                                 grpc.StatusCode.UNAUTHENTICATED, options)
        with self.server.client(token_file=self.right) as client:
            np.testing.assert_allclose(client.encode_positions(count=2, dim=4),
                                       reference.sinusoid(np.arange(2), 4),
                                       atol=2e-6)
        with self.server.client(token=TOKEN) as client:
            self.assertEqual(len(client.alibi(2).slopes), 2)

    def test_health_needs_no_token(self):
        with self.server.client() as client:
            self.assertEqual(client.health("phasor.v1.Encoder"), "SERVING")
        result = harness.run_client("--target", self.server.target, "health")
        self.assertEqual(result.returncode, 0, result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
