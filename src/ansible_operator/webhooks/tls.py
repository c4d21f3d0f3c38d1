"""The webhook server's certificate, and the CA bundle the API server verifies it with.

Two sources, as controller-runtime and kopf offer:

- files (`--webhook-cert-dir`, cert-manager style: a mounted Secret with `tls.crt`,
  `tls.key` and, from a CA issuer, `ca.crt`): read again when they change, since cert-manager
  renews them in place; the bundle is `ca.crt` when there is one (else cert-manager's CA
  injector, or whoever ships the configurations, provides it);
- made by the operator: a CA kept in a Secret (`ca.crt`, `ca.key`), shared by every replica,
  and a serving certificate issued from it for the names the API server calls; both are
  renewed while the operator runs (rotation.py), the CA replaced with an overlap: the CAs it
  replaced stay in the Secret (`previous-ca.crt`) and in the caBundle until they end.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.types import Resource
from ansible_operator.serving import pki
from ansible_operator.values.durations import DurationError, parse_duration
from ansible_operator.values.private_files import write_private

log = logging.getLogger("ansible_operator.webhooks")

SECRETS = Resource("", "v1", "Secret", "secrets", namespaced=True)
CA_CERT, CA_KEY, PREVIOUS_CA_CERT = "ca.crt", "ca.key", "previous-ca.crt"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
SERVING_STEM = "webhook"
# A CA this close to its end is replaced, so certificates issued from it never lapse.
RENEW_BEFORE = datetime.timedelta(days=30)
LIFETIMES_ENV = "ANSIBLE_OPERATOR_WEBHOOK_TLS_LIFETIMES"
RELOAD_EVERY = 10.0  # seconds between looks at certificate files
MANAGED_BY = {"app.kubernetes.io/managed-by": "ansible-operator"}


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def require_client_certificates(context: ssl.SSLContext, ca_file: Path) -> None:
    """`--webhook-client-ca`: only clients with a certificate that `ca_file` verifies finish
    the handshake. The API server presents one to webhooks when its AdmissionConfiguration
    names a kubeconfig with a client certificate for this Service; nothing else can then
    post reviews, whoever reaches the port."""
    try:
        context.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError) as error:
        raise SystemExit(f"--webhook-client-ca: cannot load {ca_file}: {error}") from None
    context.verify_mode = ssl.CERT_REQUIRED
    log.info("webhook clients must present a certificate issued by %s", ca_file)


@dataclass(frozen=True)
class Lifetimes:
    """How long the operator-made certificates live, how early they are renewed, how often
    the Secret and the configurations are looked at. Tests make them seconds through
    ANSIBLE_OPERATOR_WEBHOOK_TLS_LIFETIMES (`ca=2h,ca-renew-before=1h,check-every=2s`)."""

    ca: datetime.timedelta = pki.VALIDITY
    ca_renew_before: datetime.timedelta = RENEW_BEFORE
    serving: datetime.timedelta = datetime.timedelta(days=90)
    serving_renew_at: float = 2 / 3  # of its life, as cert-manager
    check_every: datetime.timedelta = datetime.timedelta(minutes=5)
    # Between applying a caBundle with a new CA and serving a certificate of it: the API
    # server reads the configurations a moment after they change.
    settle: datetime.timedelta = datetime.timedelta(seconds=30)

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Lifetimes:
        text = (os.environ if environ is None else environ).get(LIFETIMES_ENV, "").strip()
        values: dict[str, Any] = {}
        keys = {name.replace("_", "-"): name for name in cls.__dataclass_fields__}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, _, value = part.partition("=")
            name = keys.get(key.strip())
            if name is None:
                raise SystemExit(
                    f"{LIFETIMES_ENV}: unknown key {key.strip()!r} in {part!r} "
                    f"(known: {', '.join(keys)})"
                )
            try:
                if name == "serving_renew_at":
                    values[name] = float(value)
                else:
                    values[name] = datetime.timedelta(seconds=parse_duration(value.strip()))
            except (DurationError, ValueError) as error:
                raise SystemExit(f"{LIFETIMES_ENV}: {part!r}: {error}") from None
        lifetimes = cls(**values)
        if not 0 < lifetimes.serving_renew_at < 1 or lifetimes.ca_renew_before >= lifetimes.ca:
            raise SystemExit(
                f"{LIFETIMES_ENV}: serving-renew-at must be between 0 and 1 and "
                f"ca-renew-before shorter than ca, not {text!r}"
            )
        return lifetimes


@dataclass
class ServingTls:
    """The server's TLS context, the CA bundle for the configurations, and the files the
    context came from (watched for renewal when they are the user's)."""

    context: ssl.SSLContext
    ca_bundle: bytes | None
    cert: Path
    key: Path
    watched: bool = False
    issued: Issued | None = None  # made here: what issued it, when, until when
    authority: CaSet | None = field(default=None, repr=False)  # made here: the CAs then
    store: CaStore | None = field(default=None, repr=False)  # made here: where the CA is kept

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


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _certs(pems: bytes) -> list[bytes]:
    """Each certificate of a PEM bundle, as PEM."""
    end = b"-----END CERTIFICATE-----"
    return [part.strip() + b"\n" + end + b"\n" for part in pems.split(end)[:-1] if part.strip()]


@dataclass(frozen=True)
class CaSet:
    """The CA that issues serving certificates, and those it replaced that still verify
    certificates issued before (kept in the caBundle until they end)."""

    cert_pem: bytes
    key_pem: bytes
    previous: tuple[bytes, ...] = ()
    version: str | None = None  # the Secret's resourceVersion it was read at

    @property
    def not_after(self) -> datetime.datetime:
        return _cert(self.cert_pem).not_valid_after_utc

    def loads(self) -> bool:
        try:
            _cert(self.cert_pem)
            serialization.load_pem_private_key(self.key_pem, password=None)
        except (ValueError, TypeError):
            return False
        return True

    def bundle(self, now: datetime.datetime) -> bytes:
        """The caBundle: this CA, then the replaced ones that have not ended."""
        return self.cert_pem + b"".join(self.still_valid(now))

    def still_valid(self, now: datetime.datetime) -> tuple[bytes, ...]:
        kept = []
        for pem in self.previous:
            try:
                if _cert(pem).not_valid_after_utc > now:
                    kept.append(pem)
            except ValueError:
                continue
        return tuple(kept)


@dataclass(frozen=True)
class Issued:
    """A serving certificate made here: by which CA, when, until when."""

    ca_cert_pem: bytes
    issued_at: datetime.datetime
    not_after: datetime.datetime

    def renew_at(self, fraction: float) -> datetime.datetime:
        return self.issued_at + (self.not_after - self.issued_at) * fraction


def ca_problem(
    ca: CaSet | None, now: datetime.datetime, keep_for: datetime.timedelta
) -> str | None:
    """Why `ca` must be replaced now (None: it may serve `keep_for` more)."""
    if ca is None:
        return "there is none"
    if not ca.loads():
        return "it does not load"
    left = ca.not_after - now
    if left <= datetime.timedelta(0):
        return f"it ended at {ca.not_after.isoformat()}"
    if left <= keep_for:
        return f"it ends at {ca.not_after.isoformat()}"
    return None


def renewed(old: CaSet | None, lifetimes: Lifetimes, now: datetime.datetime) -> CaSet:
    """A new CA; the one it replaces (if it still verifies anything) joins the previous."""
    cert_pem, key_pem = new_ca(lifetimes.ca)
    previous: tuple[bytes, ...] = ()
    if old is not None and old.loads():
        previous = CaSet(b"", b"", (old.cert_pem, *old.previous)).still_valid(now)
    return CaSet(cert_pem, key_pem, previous, old.version if old else None)


class CaStore:
    """Where the CA is kept: here, for this process alone (no Secret)."""

    where = "this process"

    def __init__(self) -> None:
        self._ca: CaSet | None = None

    async def read(self) -> CaSet | None:
        return self._ca

    async def write(self, ca: CaSet, replacing: CaSet | None) -> bool:
        """Keep `ca`; False when someone else replaced `replacing` first."""
        self._ca = ca
        return True


class SecretCaStore(CaStore):
    """The Secret every replica shares: written only as read (resourceVersion), so when
    two replicas renew at once the first write wins and the other reads it back."""

    def __init__(self, api: Api, namespace: str, name: str) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.where = f"Secret {namespace}/{name}"

    async def read(self) -> CaSet | None:
        try:
            secret: dict[str, Any] = await self.api.get(SECRETS, self.name, self.namespace)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        version = (secret.get("metadata") or {}).get("resourceVersion")
        cert_pem, key_pem = _decoded(secret, CA_CERT), _decoded(secret, CA_KEY)
        previous = _certs(_decoded(secret, PREVIOUS_CA_CERT) or b"")
        return CaSet(cert_pem or b"", key_pem or b"", tuple(previous), version or "")

    async def write(self, ca: CaSet, replacing: CaSet | None) -> bool:
        body = ca_secret(self.namespace, self.name, (ca.cert_pem, ca.key_pem), ca.previous)
        try:
            if replacing is None:
                await self.api.create(SECRETS, body, self.namespace)
            else:
                body["metadata"]["resourceVersion"] = replacing.version
                await self.api.replace(SECRETS, self.name, body, self.namespace)
        except ApiError as error:
            if error.status == 409:  # another replica wrote it first: use theirs
                return False
            raise
        return True


async def current_ca(
    store: CaStore, lifetimes: Lifetimes, now: datetime.datetime, *, keep_for: datetime.timedelta
) -> tuple[CaSet, bool]:
    """The CA in `store`, renewed there when it ends within `keep_for`; and whether it was
    renewed here. Raises ApiError when the store cannot be read or written."""
    for _attempt in range(3):
        found = await store.read()
        problem = ca_problem(found, now, keep_for)
        if problem is None:
            assert found is not None
            return found, False
        made = renewed(found, lifetimes, now)
        if await store.write(made, found):
            log.info(
                "webhook CA %s in %s until=%s because=%r kept_in_bundle=%d",
                "made" if found is None else "renewed",
                store.where,
                made.not_after.isoformat(),
                problem,
                len(made.previous),
            )
            return await store.read() or made, True
    raise ApiError(409, "Conflict", f"{store.where} kept changing while it was read")


async def operator_made(
    api: Api | None,
    secret: tuple[str, str] | None,
    names: list[str],
    directory: Path,
    lifetimes: Lifetimes | None = None,
) -> ServingTls:
    """A serving certificate for `names`, from the CA in `secret` (namespace, name), made
    there if missing or near its end; without a Secret, a CA of this process alone."""
    lifetimes = lifetimes or Lifetimes.from_environment()
    store = CaStore() if secret is None or api is None else SecretCaStore(api, *secret)
    now = datetime.datetime.now(datetime.UTC)
    # A CA still good for a while is kept at start and renewed by the rotation, with an
    # overlap; one nearer its end (the operator was down through its renewal), at once.
    try:
        ca, _made = await current_ca(store, lifetimes, now, keep_for=lifetimes.ca_renew_before / 2)
    except ApiError as error:
        raise SystemExit(f"webhook CA: cannot read or write {store.where}: {error}") from None
    if not _made:
        log.info("webhook CA from %s until=%s", store.where, ca.not_after.isoformat())
    serving = issue_serving(ca, names, directory, lifetimes, now)
    serving.store = store
    return serving


def new_ca(validity: datetime.timedelta = pki.VALIDITY) -> tuple[bytes, bytes]:
    """A new CA: (certificate PEM, key PEM)."""
    with tempfile.TemporaryDirectory() as scratch:
        made = pki.create_ca(Path(scratch), "ansible-operator-webhook-ca", validity)
        return made.cert_pem(), made.key_pem()


def issue_serving(
    ca: CaSet,
    names: list[str],
    directory: Path,
    lifetimes: Lifetimes,
    now: datetime.datetime,
    context: ssl.SSLContext | None = None,
) -> ServingTls:
    """The serving certificate for `names`, issued by the CA (never past its end), kept
    (0600) in `directory`; loaded into `context` when given (the live server's: new
    connections get it), else into a new one."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    authority = pki.KeyPair(directory / CA_CERT, directory / CA_KEY)
    authority.cert_path.write_bytes(ca.cert_pem)
    write_private(authority.key_path, ca.key_pem)
    validity = min(lifetimes.serving, ca.not_after - now)
    pair = pki.issue_server_cert(authority, directory, SERVING_STEM, names, names[0], validity)
    not_after = _cert(pair.cert_pem()).not_valid_after_utc
    if context is None:
        context = server_context(pair.cert_path, pair.key_path)
    else:
        context.load_cert_chain(pair.cert_path, pair.key_path)
    issued = Issued(ca.cert_pem, now, not_after)
    return ServingTls(
        context, ca.bundle(now), pair.cert_path, pair.key_path, issued=issued, authority=ca
    )


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
    now = datetime.datetime.now(datetime.UTC)
    return ca_problem(CaSet(cert_pem, key_pem), now, RENEW_BEFORE) is None


def ca_secret(
    namespace: str, name: str, ca_pems: tuple[bytes, bytes], previous: tuple[bytes, ...] = ()
) -> dict[str, Any]:
    data = {
        CA_CERT: base64.b64encode(ca_pems[0]).decode(),
        CA_KEY: base64.b64encode(ca_pems[1]).decode(),
    }
    if previous:
        data[PREVIOUS_CA_CERT] = base64.b64encode(b"".join(previous)).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "type": "Opaque",
        "data": data,
    }
