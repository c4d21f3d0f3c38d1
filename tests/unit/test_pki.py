"""The local CA's certificates pass strict X.509 verification, which Python
3.13's default TLS context applies (VERIFY_X509_STRICT): without it, every
client on 3.13 (the test fixtures, the operator, kubectl-like tools) refused
the local API server with "Missing Authority Key Identifier"."""

from __future__ import annotations

import ssl
from pathlib import Path

from tls_loopback import exchange

from ansible_operator.serving import pki


def strict_client_context(ca: pki.KeyPair) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    # Set on every Python, so the test means the same on 3.11 as on 3.13.
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    return context


def handshake(ca: pki.KeyPair, serving: pki.KeyPair, client_cert: pki.KeyPair | None = None) -> str:
    """A TLS handshake over loopback, both sides strict; the client's CN as the server saw it."""
    client = strict_client_context(ca)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(serving.cert_path, serving.key_path)
    if client_cert is not None:
        server.verify_mode = ssl.CERT_REQUIRED
        server.load_verify_locations(cafile=str(ca.cert_path))
        server.verify_flags |= ssl.VERIFY_X509_STRICT
        client.load_cert_chain(client_cert.cert_path, client_cert.key_path)
    return exchange(client, server, "localhost")


def test_the_api_server_certificate_passes_strict_verification(tmp_path: Path) -> None:
    ca = pki.create_ca(tmp_path)
    serving = pki.issue_serving_cert(ca, tmp_path)
    handshake(ca, serving)  # raises SSLCertVerificationError otherwise


def test_a_client_certificate_passes_strict_verification(tmp_path: Path) -> None:
    ca = pki.create_ca(tmp_path)
    serving = pki.issue_serving_cert(ca, tmp_path)
    admin = pki.issue_client_cert(ca, tmp_path, "admin", ("system:masters",))
    assert handshake(ca, serving, admin) == "admin"


def test_a_service_name_longer_than_a_common_name_may_be_still_gets_its_certificate(
    tmp_path: Path,
) -> None:
    # config/: the samples' webhook Service, 68 characters with its namespace.
    service = "ansible-operator-samples-webhook-service.ansible-operator-system.svc"
    ca = pki.create_ca(tmp_path)
    serving = pki.issue_server_cert(ca, tmp_path, "webhook", [service], service)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(serving.cert_path, serving.key_path)
    assert exchange(strict_client_context(ca), server, service) == ""
