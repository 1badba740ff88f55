"""grpc.health.v1 and server reflection on a real phasor-server, asked by
phasor-client and by the Python client; PHASOR_* environment twins."""

import unittest

import grpc
from google.protobuf import descriptor_pb2

import harness

ENCODER = "phasor.v1.Encoder"


class HealthReflectionTest(harness.ServerTestCase):

    CLIENT_DEADLINE_SECONDS = 10

    def test_health_overall_and_encoder(self):
        self.assertEqual(self.client.health(""), "SERVING")
        self.assertEqual(self.client.health(ENCODER), "SERVING")
        for service, label in (("", "server"), (ENCODER, ENCODER)):
            result = harness.run_client("--target", self.server.target,
                                        "health", f"--service={service}")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout.strip(), f"{label}: SERVING")

    def test_health_unknown_service(self):
        with self.assertRaises(grpc.RpcError) as raised:
            self.client.health("no.such.Service")
        self.assertEqual(raised.exception.code(), grpc.StatusCode.NOT_FOUND)
        result = harness.run_client("--target", self.server.target, "health",
                                    "--service", "no.such.Service")
        self.assertEqual(result.returncode, 1)
        self.assertIn("NOT_FOUND", result.stderr)

    def test_reflection_lists_services(self):
        services = self.client.list_services()
        for expected in (ENCODER, "grpc.health.v1.Health",
                         "grpc.reflection.v1alpha.ServerReflection"):
            self.assertIn(expected, services)

    def test_reflection_describes_encoder(self):
        files = self.client.file_containing_symbol(ENCODER)
        self.assertTrue(files)
        methods = set()
        for serialized in files:
            proto = descriptor_pb2.FileDescriptorProto.FromString(serialized)
            for service in proto.service:
                if f"{proto.package}.{service.name}" == ENCODER:
                    methods.update(method.name for method in service.method)
        self.assertTrue({"EncodePositions", "ApplyRope", "RopeTables",
                         "AlibiBias", "EncodeObservations",
                         "EncodeObservationsStream", "Describe",
                         "ListProfiles"} <= methods, methods)
        with self.assertRaises(LookupError):
            self.client.file_containing_symbol("no.such.Symbol")

    def test_unreachable_server_is_unavailable(self):
        result = harness.run_client(
            "--target", f"127.0.0.1:{harness.free_port()}", "--deadline_ms",
            5000, "health")
        self.assertEqual(result.returncode, 1)
        self.assertIn("UNAVAILABLE", result.stderr)


class EnvironmentTwinTest(unittest.TestCase):
    """Kubernetes configures the server through PHASOR_* variables."""

    def test_enable_echo_from_environment(self):
        payload = b"\x00phasor\xff" * 100
        with harness.Server(env={"PHASOR_ENABLE_ECHO": "true"}) as server:
            with server.client(deadline_seconds=10) as client:
                self.assertEqual(client.echo(payload), payload)
        with harness.Server() as server:
            with server.client(deadline_seconds=10) as client:
                with self.assertRaises(grpc.RpcError) as raised:
                    client.echo(payload)
                self.assertEqual(raised.exception.code(),
                                 grpc.StatusCode.UNIMPLEMENTED)


if __name__ == "__main__":
    unittest.main(verbosity=2)
