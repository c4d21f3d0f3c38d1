"""Who the operator is to the API server: the Authorization header, kept fresh.

One class per way a kubeconfig user (or a pod) authenticates. Each answers
`header()` for the next request and `refresh(rejected)` after the API server
answered 401 to `rejected`. The `kubernetes` package reads a token file once
and never refreshes OIDC id-tokens; client-go re-reads and re-runs, and so do
we: token files are re-read when they change (the kubelet rotates projected
service-account tokens), exec plugins are re-run before their credential
expires, OIDC id-tokens are renewed through the identity provider.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client as k8s_client
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.dateutil import parse_rfc3339
from kubernetes.config.exec_provider import ExecProvider

log = logging.getLogger("ansible_operator.kube")

# As the `kubernetes` package: a credential is renewed this long before it expires.
EXPIRY_SKEW = datetime.timedelta(minutes=5)


class CredentialError(RuntimeError):
    """A credential could not be obtained; the message names its source."""


def now() -> datetime.datetime:
    """The clock expiry is judged by (tests move it)."""
    return datetime.datetime.now(tz=datetime.UTC)


def renew_at(obtained: datetime.datetime, expiry: datetime.datetime) -> datetime.datetime:
    """When to renew: EXPIRY_SKEW before expiry, but no sooner than halfway
    through the credential's life, so a token issued for less than twice the
    skew is not renewed on every request."""
    return expiry - min(EXPIRY_SKEW, max(expiry - obtained, datetime.timedelta(0)) / 2)


class Credentials(Protocol):
    source: str

    async def header(self) -> str | None:
        """The Authorization header for the next request (None: send none)."""
        ...

    async def refresh(self, rejected: str | None) -> bool:
        """The API server answered 401 to `rejected`: renew now. True when the
        header is now different, so the request is worth sending again."""
        ...


class NoCredentials:
    """Client certificates (in the TLS context) or nothing at all."""

    def __init__(self, source: str = "none") -> None:
        self.source = source

    async def header(self) -> str | None:
        return None

    async def refresh(self, rejected: str | None) -> bool:
        return False


class StaticHeader:
    """A kubeconfig `token:` or `username`/`password`: nothing to renew."""

    def __init__(self, value: str, source: str) -> None:
        self.value = value
        self.source = source

    @classmethod
    def bearer(cls, token: str, source: str) -> StaticHeader:
        return cls(f"Bearer {token.strip()}", source)

    @classmethod
    def basic(cls, username: str, password: str, source: str) -> StaticHeader:
        pair = f"{username}:{password}".encode()
        return cls(f"Basic {base64.b64encode(pair).decode('ascii')}", source)

    async def header(self) -> str | None:
        return self.value

    async def refresh(self, rejected: str | None) -> bool:
        return False


class TokenFile:
    """A bearer token read from a file, again whenever the file changes.

    The kubelet rotates a projected service-account token by swapping a
    symlink (`..data`) to a new directory: the path then resolves to another
    inode, which the stat check sees. One stat per request costs microseconds.
    """

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source
        self._seen: tuple[int, int, int, int] | None = None
        self._token = ""
        self._read()  # a missing or empty file is an error at start-up

    def _identity(self) -> tuple[int, int, int, int]:
        stat = self.path.stat()
        return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _read(self) -> None:
        try:
            identity = self._identity()
            token = self.path.read_text().strip()
        except OSError as error:
            raise CredentialError(f"{self.source}: cannot read token file: {error}") from error
        if not token:
            raise CredentialError(f"{self.source}: token file {self.path} is empty")
        self._seen, self._token = identity, token

    def _reread(self, *, force: bool) -> None:
        try:
            if not force and self._identity() == self._seen:
                return
            self._read()
        except (OSError, CredentialError) as error:
            # Mid-rotation or a slip of the writer: the last token may still be valid.
            log.warning("token file unreadable, keeping the last token: %s", error)

    async def header(self) -> str | None:
        self._reread(force=False)
        return f"Bearer {self._token}"

    async def refresh(self, rejected: str | None) -> bool:
        self._reread(force=True)
        return f"Bearer {self._token}" != rejected


class Expiring:
    """A credential obtained by a blocking call and renewed before it expires.

    The call runs in a worker thread, never on the event loop; one lock makes
    concurrent requests share one renewal. A renewal that fails after start-up
    is logged and the last credential kept: the API server has the last word.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._loaded = False
        self._header: str | None = None
        self._renew_at: datetime.datetime | None = None  # None: valid until a 401
        self._generation = 0

    def _obtain(self) -> tuple[str | None, datetime.datetime | None, datetime.datetime | None]:
        """The header, its expiry and its issue time (None: unknown); blocking."""
        raise NotImplementedError

    def _fresh(self) -> bool:
        return self._loaded and (self._renew_at is None or now() < self._renew_at)

    def _renew(self, generation: int | None) -> None:
        """Renew unless another caller did meanwhile: `generation` is the one a
        forced renewal saw rejected; None renews only what is not fresh."""
        with self._lock:
            if generation is None and self._fresh():
                return
            if generation is not None and generation != self._generation:
                return
            obtained = now()
            header, expiry, issued = self._obtain()
            self._header = header
            self._renew_at = None if expiry is None else renew_at(issued or obtained, expiry)
            self._loaded = True
            self._generation += 1

    def load(self) -> None:
        """Obtain the first credential (start-up: errors are fatal)."""
        self._renew(None)

    async def header(self) -> str | None:
        if not self._fresh():
            try:
                await asyncio.to_thread(self._renew, None)
            except Exception as error:  # third-party code: a plugin, an IdP client
                log.warning("cannot renew credential source=%s error=%s", self.source, error)
        return self._header

    async def refresh(self, rejected: str | None) -> bool:
        if self._header != rejected:
            return True  # renewed by another request meanwhile
        try:
            await asyncio.to_thread(self._renew, self._generation)
        except Exception as error:  # third-party code: a plugin, an IdP client
            log.warning("cannot renew credential after 401 source=%s error=%s", self.source, error)
            return False
        return self._header != rejected


class ExecPlugin(Expiring):
    """A kubeconfig `exec:` plugin (aws eks get-token, gke-gcloud-auth-plugin,
    kubelogin, ...), run through the `kubernetes` package's ExecProvider, again
    before `expirationTimestamp` and after a 401 (as client-go)."""

    def __init__(self, provider: ExecProvider, source: str) -> None:
        super().__init__(source)
        self.provider = provider
        # PEM data when the plugin answers with a client certificate instead.
        self.client_certificate: tuple[str, str] | None = None

    def _obtain(self) -> tuple[str | None, datetime.datetime | None, datetime.datetime | None]:
        try:
            status = self.provider.run()
        except ConfigException as error:
            raise CredentialError(f"{self.source}: {error}") from error
        expiry = status.get("expirationTimestamp")
        expires = parse_rfc3339(expiry) if expiry else None
        if status.get("token"):
            return f"Bearer {status['token']}", expires, None
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            self.client_certificate = (status["clientCertificateData"], status["clientKeyData"])
            return None, None, None  # a certificate is read once, into the TLS context
        raise CredentialError(
            f"{self.source}: exec plugin printed neither status.token nor "
            "status.clientCertificateData with status.clientKeyData"
        )


def jwt_times(token: str) -> tuple[datetime.datetime | None, datetime.datetime | None]:
    """The `exp` and `iat` claims of a JWT (not verified: the API server does that)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None, None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None, None
    if not isinstance(claims, dict):
        return None, None

    def when(claim: str) -> datetime.datetime | None:
        value = claims.get(claim)
        if not isinstance(value, int | float):
            return None
        return datetime.datetime.fromtimestamp(value, tz=datetime.UTC)

    return when("exp"), when("iat")


class OidcToken(Expiring):
    """An `auth-provider: oidc` id-token; `renew` (the `kubernetes` package's
    refresh through the identity provider, blocking) is called when it nears
    the expiry written in the token."""

    def __init__(self, id_token: str, renew: Callable[[], str | None], source: str) -> None:
        super().__init__(source)
        self._next: str | None = id_token
        self._renew_token = renew

    def _obtain(self) -> tuple[str | None, datetime.datetime | None, datetime.datetime | None]:
        token, self._next = self._next, None
        if token is None:
            header = self._renew_token()
            if not header:
                raise CredentialError(f"{self.source}: the identity provider gave no id-token")
            token = header.split(" ", 1)[1] if header.lower().startswith("bearer ") else header
        return f"Bearer {token}", *jwt_times(token)


class LibraryCredentials:
    """A `kubernetes.client.Configuration`, read as its own ApiClient reads it:
    `api_key['BearerToken']` (or the alias `authorization`) with its
    `api_key_prefix`, after its `refresh_api_key_hook`; else basic auth."""

    def __init__(self, configuration: k8s_client.Configuration, source: str) -> None:
        self.configuration = configuration
        self.source = source

    def _current(self) -> str | None:
        configuration = self.configuration
        token = configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            return token
        if configuration.username or configuration.password:
            return configuration.get_basic_auth_token()
        return None

    async def header(self) -> str | None:
        if self.configuration.refresh_api_key_hook is None:
            return self._current()
        # The hook may run a command or call out (gcp): keep the event loop free.
        return await asyncio.to_thread(self._current)

    async def refresh(self, rejected: str | None) -> bool:
        return await self.header() != rejected


def user_credentials(
    user: Any,
    base_path: Path,
    cluster: Any,
    source: str,
    renew_oidc: Callable[[], str | None],
) -> Credentials | None:
    """Credentials for a kubeconfig `users[].user` (a library ConfigNode), in
    the library's order: auth-provider, token/tokenFile, exec, basic auth.
    None for an auth-provider other than OIDC (left to the library)."""
    if "auth-provider" in user:
        provider = user["auth-provider"]
        if provider.safe_get("name") == "oidc" and "config" in provider:
            id_token = provider["config"].safe_get("id-token")
            if not id_token:
                raise CredentialError(f"{source}: auth-provider oidc has no config.id-token")
            oidc = OidcToken(str(id_token), renew_oidc, f"{source} (oidc)")
            oidc.load()  # an expired one is renewed on first use
            return oidc
        return None
    token = user.safe_get("token")
    if token:
        return StaticHeader.bearer(str(token), f"{source} (token)")
    token_file = user.safe_get("tokenFile")
    if token_file:
        return TokenFile(base_path / Path(str(token_file)).expanduser(), f"{source} (tokenFile)")
    if "exec" in user:
        try:
            provider_exec = ExecProvider(user["exec"], str(base_path), cluster)
        except ConfigException as error:
            raise CredentialError(f"{source}: exec: {error}") from error
        plugin = ExecPlugin(provider_exec, f"{source} (exec {user['exec'].safe_get('command')})")
        plugin.load()
        return plugin
    username, password = user.safe_get("username"), user.safe_get("password")
    if username is not None or password is not None:
        return StaticHeader.basic(str(username or ""), str(password or ""), f"{source} (basic)")
    return None
