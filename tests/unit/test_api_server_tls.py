"""The operator reaches an API server whose CA and certificate carry no key
identifiers (older self-made CAs; Go's verifier, so kubectl, accepts them),
though Python 3.13 verifies strictly by default; the check is still a real
verification: another CA's certificate is refused."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ansible_operator.kube.config import api_server_context


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def ca_and_server_without_key_identifiers(directory: Path, name: str) -> tuple[Path, Path, Path]:
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / f"{name}-ca.crt", directory / f"{name}.crt", directory / f"{name}.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(_pem_key(key))
    return paths


def connect(client: ssl.SSLContext, cert: Path, key: Path) -> None:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            connection, _ = listener.accept()
            try:
                with server.wrap_socket(connection, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with (
                socket.create_connection(("127.0.0.1", port)) as raw,
                client.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
            ):
                tls.sendall(b"x")
        finally:
            thread.join(timeout=10)


def test_a_ca_without_key_identifiers_is_accepted_as_kubectl_does(tmp_path: Path) -> None:
    ca, cert, key = ca_and_server_without_key_identifiers(tmp_path, "old")
    strict = ssl.create_default_context(cafile=str(ca))
    strict.verify_flags |= ssl.VERIFY_X509_STRICT  # Python 3.13's default
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(strict, cert, key)
    connect(api_server_context(str(ca)), cert, key)


def test_a_certificate_of_another_ca_is_still_refused(tmp_path: Path) -> None:
    ca, _, _ = ca_and_server_without_key_identifiers(tmp_path, "trusted")
    _, cert, key = ca_and_server_without_key_identifiers(tmp_path, "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(api_server_context(str(ca)), cert, key)
