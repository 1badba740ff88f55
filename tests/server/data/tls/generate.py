#!/usr/bin/python3
"""Writes the TLS fixtures of tests/server/tls_test.cc into this directory.

A self-signed test CA (ca.pem) issues a server certificate for localhost /
127.0.0.1 (server.pem, server.key) and a client certificate (client.pem,
client.key); a second, unrelated CA (not written out) issues a client
certificate (other_client.pem, other_client.key) the server must refuse.
EC P-256 keys, valid 1950-2200 so the committed files do not expire.
Test-only keys: never use them anywhere else.

Run with Debian's python3-cryptography: /usr/bin/python3 generate.py
"""
import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
NOT_BEFORE = datetime.datetime(1950, 1, 1)
NOT_AFTER = datetime.datetime(2200, 1, 1)


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def cert_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def name(common_name):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca(common_name):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(name(common_name)).issuer_name(name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def make_leaf(ca_key, ca_cert, common_name, usage, sans=None):
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder()
               .subject_name(name(common_name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def main():
    ca_key, ca_cert = make_ca("Phasor Test CA")
    server_key, server_cert = make_leaf(
        ca_key, ca_cert, "localhost", ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key, client_cert = make_leaf(ca_key, ca_cert, "phasor-test-client",
                                        ExtendedKeyUsageOID.CLIENT_AUTH)
    other_key, other_cert = make_ca("Unrelated Test CA")
    stranger_key, stranger_cert = make_leaf(other_key, other_cert, "stranger",
                                            ExtendedKeyUsageOID.CLIENT_AUTH)
    write("ca.pem", cert_pem(ca_cert))
    write("server.pem", cert_pem(server_cert))
    write("server.key", key_pem(server_key))
    write("client.pem", cert_pem(client_cert))
    write("client.key", key_pem(client_key))
    write("other_client.pem", cert_pem(stranger_cert))
    write("other_client.key", key_pem(stranger_key))


if __name__ == "__main__":
    main()
