"""The operator reaches an API server whose CA and certificate carry no key
identifiers (older self-made CAs; Go's verifier, so kubectl, accepts them),
though Python 3.13 verifies strictly by default; the check is still a real
verification: another CA's certificate is refused."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from old_certificates import cert_pem, issue, key_pem
from tls_loopback import exchange

from ansible_operator.kube.config import api_server_context


def ca_and_server_without_key_identifiers(directory: Path, name: str) -> tuple[Path, Path, Path]:
    ca, ca_key = issue(f"{name}-ca", ca=True)
    server, key = issue("kube-apiserver", issuer=(ca.subject, ca_key), ip="127.0.0.1")
    paths = (directory / f"{name}-ca.crt", directory / f"{name}.crt", directory / f"{name}.key")
    paths[0].write_bytes(cert_pem(ca))
    paths[1].write_bytes(cert_pem(server))
    paths[2].write_bytes(key_pem(key))
    return paths


def connect(client: ssl.SSLContext, cert: Path, key: Path) -> None:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    exchange(client, server, "127.0.0.1")


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
