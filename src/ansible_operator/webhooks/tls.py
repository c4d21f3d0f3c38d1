"""The webhook server's certificate, and the CA bundle the API server verifies it with.

Two sources, as controller-runtime and kopf offer:

- files (`--webhook-cert-dir`, cert-manager style: a mounted Secret with `tls.crt`,
  `tls.key` and, from a CA issuer, `ca.crt`): read again when they change, since cert-manager
  renews them in place; the bundle is `ca.crt` when there is one (else cert-manager's CA
  injector, or whoever ships the configurations, provides it);
- made by the operator: a CA kept in a Secret (`ca.crt`, `ca.key`), shared by every replica
  and made again when it nears its end, and a serving certificate issued from it at each
  start for the names the API server calls.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import logging
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ansible_operator import pki
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.types import Resource
from ansible_operator.private_files import write_private

log = logging.getLogger("ansible_operator.webhooks")

SECRETS = Resource("", "v1", "Secret", "secrets", namespaced=True)
CA_CERT, CA_KEY = "ca.crt", "ca.key"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
# A CA this close to its end is replaced, so certificates issued from it never lapse.
RENEW_BEFORE = datetime.timedelta(days=30)
RELOAD_EVERY = 10.0  # seconds between looks at certificate files
MANAGED_BY = {"app.kubernetes.io/managed-by": "ansible-operator"}


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


@dataclass
class ServingTls:
    """The server's TLS context, the CA bundle for the configurations, and the files the
    context came from (watched for renewal when they are the user's)."""

    context: ssl.SSLContext
    ca_bundle: bytes | None
    cert: Path
    key: Path
    watched: bool = False

    async def follow_renewals(self) -> None:
        """Load the certificate again whenever its files change (cert-manager renews them
        in place); new connections get the new one. Runs until cancelled."""
        seen = _stamp(self.cert, self.key)
        while True:
            await asyncio.sleep(RELOAD_EVERY)
            now = _stamp(self.cert, self.key)
            if now == seen:
                continue
            try:
                self.context.load_cert_chain(self.cert, self.key)
            except (OSError, ssl.SSLError) as error:
                log.warning("webhook certificate changed but does not load yet: %s", error)
                continue
            seen = now
            log.info("webhook certificate reloaded cert=%s", self.cert)


def _stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    stamps = []
    for path in paths:
        try:
            stat = path.stat()
            stamps.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            stamps.append((0, 0))
    return tuple(stamps)


def from_files(directory: Path) -> ServingTls:
    """`--webhook-cert-dir`: tls.crt and tls.key, and ca.crt if there is one."""
    cert, key = directory / TLS_CERT, directory / TLS_KEY
    try:
        context = server_context(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise SystemExit(f"--webhook-cert-dir: cannot load {cert} and {key}: {error}") from None
    ca = directory / CA_CERT
    bundle = ca.read_bytes() if ca.is_file() else None
    return ServingTls(context, bundle, cert, key, watched=True)


async def operator_made(
    api: ApiClient | None, secret: tuple[str, str] | None, names: list[str], directory: Path
) -> ServingTls:
    """A serving certificate for `names`, from the CA in `secret` (namespace, name), made
    there if missing or near its end; without a Secret, a CA of this process alone."""
    if secret is None or api is None:
        ca_pems = new_ca()
    else:
        ca_pems = await _shared_ca(api, secret[0], secret[1])
    return issue_serving(ca_pems, names, directory)


def new_ca() -> tuple[bytes, bytes]:
    """A new CA: (certificate PEM, key PEM)."""
    with tempfile.TemporaryDirectory() as scratch:
        made = pki.create_ca(Path(scratch), "ansible-operator-webhook-ca")
        return made.cert_pem(), made.key_pem()


def issue_serving(ca_pems: tuple[bytes, bytes], names: list[str], directory: Path) -> ServingTls:
    """The serving certificate for `names`, issued by the CA, kept (0600) in `directory`."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca = pki.KeyPair(directory / CA_CERT, directory / CA_KEY)
    ca.cert_path.write_bytes(ca_pems[0])
    write_private(ca.key_path, ca_pems[1])
    pair = pki.issue_server_cert(ca, directory, "webhook", names, names[0])
    context = server_context(pair.cert_path, pair.key_path)
    return ServingTls(context, ca_pems[0], pair.cert_path, pair.key_path)


def _decoded(secret: dict[str, Any] | None, key: str) -> bytes | None:
    data = (secret or {}).get("data")
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return None


def usable_ca(cert_pem: bytes | None, key_pem: bytes | None) -> bool:
    """A CA certificate and key that load and stay valid for RENEW_BEFORE at least."""
    if not cert_pem or not key_pem:
        return False
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return False
    now = datetime.datetime.now(datetime.UTC)
    return cert.not_valid_after_utc - now > RENEW_BEFORE


def ca_secret(namespace: str, name: str, ca_pems: tuple[bytes, bytes]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "type": "Opaque",
        "data": {
            CA_CERT: base64.b64encode(ca_pems[0]).decode(),
            CA_KEY: base64.b64encode(ca_pems[1]).decode(),
        },
    }


async def _shared_ca(api: ApiClient, namespace: str, name: str) -> tuple[bytes, bytes]:
    """The CA every replica shares; when two make it at once, the first write wins and
    the other reads it back."""
    where = f"Secret {namespace}/{name}"
    for _attempt in range(3):
        try:
            secret: dict[str, Any] | None = await api.get(SECRETS, name, namespace)
        except ApiError as error:
            if error.status != 404:
                raise SystemExit(f"webhook CA: cannot read {where}: {error}") from None
            secret = None
        cert_pem, key_pem = _decoded(secret, CA_CERT), _decoded(secret, CA_KEY)
        if cert_pem and key_pem and usable_ca(cert_pem, key_pem):
            log.info("webhook CA from %s", where)
            return cert_pem, key_pem
        made = new_ca()
        body = ca_secret(namespace, name, made)
        try:
            if secret is None:
                await api.create(SECRETS, body, namespace)
            else:
                # Replaced only as read: a replica that renewed it meanwhile wins (409).
                version = (secret.get("metadata") or {}).get("resourceVersion")
                body["metadata"]["resourceVersion"] = version
                await api.replace(SECRETS, name, body, namespace)
        except ApiError as error:
            if error.status == 409:  # another replica wrote it first: use theirs
                continue
            raise SystemExit(f"webhook CA: cannot write {where}: {error}") from None
        log.info("webhook CA made and kept in %s", where)
        return made
    raise SystemExit(f"webhook CA: {where} kept changing while it was read; start again")
