"""Message and element limits: a request or response over the limit is
RESOURCE_EXHAUSTED and the server keeps serving. The message limit is set
through its environment twin, PHASOR_MAX_MESSAGE_BYTES, as Kubernetes does."""

import os
import tempfile
import unittest

import grpc
import numpy as np

import harness
import reference

LIMIT_BYTES = 64 << 10
MAX_ELEMENTS = 100_000


class LimitsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = harness.Server(
            [f"--max_elements_per_request={MAX_ELEMENTS}"],
            env={"PHASOR_MAX_MESSAGE_BYTES": str(LIMIT_BYTES)}).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()

    def assert_still_serving(self, client):
        self.assertEqual(client.health(), "SERVING")
        np.testing.assert_allclose(client.encode_positions(count=3, dim=4),
                                   reference.sinusoid(np.arange(3), 4),
                                   atol=2e-6)

    def test_request_over_message_limit(self):
        # 400 x 64 float32 content = 102400 bytes > 64 KiB.
        content = np.zeros((400, 64), dtype=np.float32)
        with self.server.client(max_message_bytes=1 << 20) as client:
            with self.assertRaises(grpc.RpcError) as raised:
                client.encode_positions(count=400, dim=64, content=content)
            self.assertEqual(raised.exception.code(),
                             grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assert_still_serving(client)

    def test_request_over_message_limit_cli(self):
        path = os.path.join(self.tmp.name, "big.npy")
        np.save(path, np.zeros((400, 64), dtype=np.float32))
        result = harness.run_client(
            "--target", self.server.target, "--max_message_bytes", 1 << 20,
            "encode-positions", "--content", path, "--dim", 64)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("RESOURCE_EXHAUSTED", result.stderr)
        # Whose limit, and what raises it.
        self.assertIn("the server's message limit", result.stderr)
        self.assertIn("phasor-server --max_message_bytes", result.stderr)
        with self.server.client() as client:
            self.assert_still_serving(client)

    def test_response_over_message_limit(self):
        # 1000 x 64 float32 = 256000 bytes of output > 64 KiB, though only
        # 64000 elements (under the element cap).
        with self.server.client(max_message_bytes=1 << 20) as client:
            with self.assertRaises(grpc.RpcError) as raised:
                client.encode_positions(count=1000, dim=64)
            self.assertEqual(raised.exception.code(),
                             grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assert_still_serving(client)

    def test_request_over_element_limit(self):
        # A tiny request asking for 2000 x 64 = 128000 > 100000 elements.
        with self.server.client() as client:
            with self.assertRaises(grpc.RpcError) as raised:
                client.encode_positions(count=2000, dim=64)
            self.assertEqual(raised.exception.code(),
                             grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assert_still_serving(client)

    def test_client_side_limit(self):
        # 100 x 64 float32 = 25600 bytes: under the server's limit, over the
        # client's own --max_message_bytes.
        result = harness.run_client(
            "--target", self.server.target, "--max_message_bytes", 4096,
            "encode-positions", "--count", 100, "--dim", 64)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("RESOURCE_EXHAUSTED", result.stderr)
        self.assertIn("the client's message limit", result.stderr)
        self.assertIn("phasor-client --max_message_bytes", result.stderr)
        # The environment variable sets the client's limit too; the flag
        # wins over it.
        result = harness.run_client(
            "--target", self.server.target,
            "encode-positions", "--count", 100, "--dim", 64,
            env={"PHASOR_MAX_MESSAGE_BYTES": "4096"})
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("the client's message limit", result.stderr)
        result = harness.run_client(
            "--target", self.server.target, "--max_message_bytes", 1 << 20,
            "encode-positions", "--count", 100, "--dim", 64)
        self.assertEqual(result.returncode, 0, result.stderr)


class DefaultLimitsTest(unittest.TestCase):
    """Server and clients default to 64 MiB: a 32 MiB result needs no flag."""

    def test_32_mib_response_with_default_limits(self):
        count, dim = 32768, 256  # 32 MiB of float32
        with harness.Server([]) as server, \
                tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "pe.npy")
            result = harness.run_client(
                "--target", server.target, "encode-positions",
                "--count", count, "--dim", dim, "--out", path)
            self.assertEqual(result.returncode, 0, result.stderr)
            np.testing.assert_array_equal(np.load(path).shape, (count, dim))
            with server.client() as client:
                encodings = client.encode_positions(count=count, dim=dim)
            self.assertEqual(encodings.shape, (count, dim))
            np.testing.assert_allclose(
                encodings[[0, -1]],
                reference.sinusoid(np.array([0, count - 1]), dim), atol=2e-6)


if __name__ == "__main__":
    unittest.main(verbosity=2)
