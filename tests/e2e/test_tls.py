"""TLS and mutual TLS with certificates made at test time by openssl: a CA,
a server certificate for 127.0.0.1/localhost and a client certificate."""

import os
import subprocess
import tempfile
import unittest

import grpc
import numpy as np

import harness
import reference


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, timeout=60,
                   capture_output=True)


def make_certificates(directory):
    """ca.pem, server.pem/server.key, client.pem/client.key signed by the CA,
    and rogue.pem/rogue.key, a self-signed client certificate (P-256 keys,
    valid 2 days). Returns {name: path}."""
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes"]
    openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=phasor-e2e-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    for name, usage, extra in (
            ("server", "serverAuth",
             "subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
            ("client", "clientAuth", "")):
        with open(os.path.join(directory, f"{name}.ext"), "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nextendedKeyUsage={usage}\n"
                    f"{extra}")
        openssl("req", *curve, "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN=phasor-e2e-{name}", cwd=directory)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem",
                "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{name}.pem",
                "-days", "2", "-extfile", f"{name}.ext", cwd=directory)
    openssl("req", "-x509", *curve, "-keyout", "rogue.key", "-out",
            "rogue.pem", "-days", "2", "-subj", "/CN=phasor-e2e-rogue",
            cwd=directory)
    return {name: os.path.join(directory, name) for name in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key",
             "rogue.pem", "rogue.key")}


class TlsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.certs = make_certificates(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def server_flags(self, mutual):
        flags = ["--tls_cert", self.certs["server.pem"],
                 "--tls_key", self.certs["server.key"]]
        if mutual:
            flags += ["--tls_client_ca", self.certs["ca.pem"]]
        return flags

    def client_flags(self, server, *extra):
        return ["--target", server.target, "--deadline_ms", 10000, *extra]

    def assert_cli_ok(self, server, *tls_flags):
        result = harness.run_client(*self.client_flags(server, *tls_flags),
                                    "encode-positions", "--count", 3, "--dim",
                                    4, "--out", os.path.join(self.tmp.name,
                                                             "pe.csv"))
        self.assertEqual(result.returncode, 0, result.stderr)
        pe = np.loadtxt(os.path.join(self.tmp.name, "pe.csv"), delimiter=",")
        np.testing.assert_allclose(pe, reference.sinusoid(np.arange(3), 4),
                                   atol=2e-6)

    def assert_cli_rejected(self, server, *tls_flags):
        result = harness.run_client(*self.client_flags(server, *tls_flags),
                                    "health")
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("UNAVAILABLE", result.stderr)

    def assert_python_rejected(self, server, **options):
        with harness.phasor_client.EncoderClient(
                server.target, deadline_seconds=10, **options) as client:
            with self.assertRaises(grpc.RpcError) as raised:
                client.encode_positions(count=2, dim=2)
            self.assertEqual(raised.exception.code(),
                             grpc.StatusCode.UNAVAILABLE)

    def test_tls(self):
        ca = self.certs["ca.pem"]
        with harness.Server(self.server_flags(mutual=False),
                            client_options={"tls_ca": ca}) as server:
            self.assert_cli_ok(server, "--tls_ca", ca)
            with server.client() as client:
                np.testing.assert_allclose(
                    client.encode_positions(count=3, dim=4),
                    reference.sinusoid(np.arange(3), 4), atol=2e-6)
                self.assertEqual(client.health(), "SERVING")
            # Plaintext against a TLS port.
            self.assert_cli_rejected(server)
            self.assert_python_rejected(server)
            # TLS, but the CA is not trusted (system roots only).
            self.assert_cli_rejected(server, "--tls")

    def test_mutual_tls(self):
        ca = self.certs["ca.pem"]
        cert, key = self.certs["client.pem"], self.certs["client.key"]
        with harness.Server(self.server_flags(mutual=True),
                            client_options={"tls_ca": ca, "tls_cert": cert,
                                            "tls_key": key}) as server:
            self.assert_cli_ok(server, "--tls_ca", ca, "--tls_cert", cert,
                               "--tls_key", key)
            with server.client() as client:
                self.assertEqual(client.alibi(4).slopes.tolist(),
                                 reference.alibi_slopes(4).tolist())
            # TLS without a client certificate.
            self.assert_cli_rejected(server, "--tls_ca", ca)
            self.assert_python_rejected(server, tls_ca=ca)
            # A client certificate the CA did not sign.
            self.assert_cli_rejected(server, "--tls_ca", ca, "--tls_cert",
                                     self.certs["rogue.pem"], "--tls_key",
                                     self.certs["rogue.key"])
            # Plaintext.
            self.assert_cli_rejected(server)


if __name__ == "__main__":
    unittest.main(verbosity=2)
