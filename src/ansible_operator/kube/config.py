"""Where the API server is and how to authenticate to it.

The `kubernetes` package reads kubeconfig files (merging $KUBECONFIG's list,
choosing the context, writing out embedded certificates); we turn its result
into what our aiohttp traffic needs: a base URL, an SSL context, and
credentials that stay valid (kube/credentials.py) as the operator runs for
weeks: rotated token files, exec plugins and OIDC tokens that expire.

A kubeconfig is also read again when its file changes (`ansible-operator
cluster up` on new ports, a rewritten context, a rotated client certificate):
the KubeConfig knows its files and takes the new settings in place, under a new
`generation`, which the API client and the proxy follow (kube/upstreams.py).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import logging
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigMerger

from ansible_operator.kube.credentials import (
    CredentialError,
    Credentials,
    ExecPlugin,
    LibraryCredentials,
    NoCredentials,
    TokenFile,
    user_credentials,
)

log = logging.getLogger("ansible_operator.kube")

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# What a kubeconfig user may say about credentials: ours to handle, hidden from
# the library (it would run exec plugins itself and keep tokens it never re-reads).
CREDENTIAL_KEYS = ("auth-provider", "token", "tokenFile", "exec", "username", "password")
RECHECK_INTERVAL = 1.0  # seconds between looks at a kubeconfig's files for a change
# File timestamps are coarse: a file written this close to a look may change
# again with the same stat, so its content is compared (git's "racy" entries).
RACY_NS = 2_000_000_000


class KubeConfigError(RuntimeError):
    """No usable cluster configuration; the message says what was tried."""


FileState = tuple[int, int, int, int] | None  # device, inode, mtime, size; None: absent


class SourceFiles:
    """The kubeconfig files a KubeConfig was read from, and whether their
    content changed since: a stat per look (at most one a second, the cost of a
    request's token-file check), the content read only when a stat differs or
    the file was written just before the last look, so a `touch` or a rewrite
    with the same bytes changes nothing."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self._stated_at = time.time_ns()
        self._states = self._stat()
        self._digest = self._read_digest()
        self._looked_at = time.monotonic()

    def _stat(self) -> tuple[FileState, ...]:
        states: list[FileState] = []
        for path in self.paths:
            try:
                stat = path.stat()  # through symlinks: a ConfigMap mount swaps `..data`
            except OSError:
                states.append(None)
            else:
                states.append((stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size))
        return tuple(states)

    def _read_digest(self) -> str:
        digest = hashlib.sha256()
        for path in self.paths:
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"\0absent")
            digest.update(b"\0")
        return digest.hexdigest()

    def _racy(self) -> bool:
        newest = max((state[2] for state in self._states if state), default=0)
        return self._stated_at - newest < RACY_NS

    def changed(self) -> bool:
        """True once per change of content, to the one caller that saw it."""
        now = time.monotonic()
        if now - self._looked_at < RECHECK_INTERVAL:
            return False
        self._looked_at = now
        racy = self._racy()
        self._stated_at = time.time_ns()
        states = self._stat()
        if states == self._states and not racy:
            return False
        self._states = states
        digest = self._read_digest()
        if digest == self._digest:
            return False
        self._digest = digest
        return True


@dataclass
class KubeConfig:
    server: str
    ssl: ssl.SSLContext | bool
    namespace: str = "default"
    source: str = ""
    credentials: Credentials = field(default_factory=NoCredentials, repr=False)
    context: str | None = None
    # Where it was read from (None: in-cluster or built in code, never re-read),
    # and how many times it has been re-read since: sessions and watches made
    # under an older generation talk to what may be another server.
    files: SourceFiles | None = field(default=None, repr=False, compare=False)
    generation: int = 0
    # `--as`: the user every request acts as (Impersonate-User), so that a local
    # run meets the RBAC of the identity it will have when deployed. Not from the
    # kubeconfig: a reload keeps it.
    impersonate: str | None = None
    _reloading: asyncio.Lock = field(
        default_factory=asyncio.Lock, init=False, repr=False, compare=False
    )

    async def reload_if_changed(self) -> bool:
        """Read the kubeconfig again if its files changed, and take its server,
        TLS settings, namespace and credentials. True when they were taken. A
        file that does not load (half written, broken) is logged and the
        settings in use are kept until the file changes again."""
        if self.files is None or not self.files.changed():
            return False
        async with self._reloading:
            try:
                # Reading may run an exec plugin: never on the event loop.
                fresh = await asyncio.to_thread(_from_kubeconfig, self.source, self.context)
            except KubeConfigError as error:
                log.warning(
                    "kubeconfig changed but cannot be used, keeping server=%s error=%s",
                    self.server,
                    error,
                )
                return False
            previous = self.server
            self.server, self.ssl = fresh.server, fresh.ssl
            self.namespace, self.credentials = fresh.namespace, fresh.credentials
            self.generation += 1
            log.info(
                "kubeconfig changed, using it now source=%s server=%s was=%s",
                self.source,
                self.server,
                previous,
            )
            return True

    def for_another_loop(self) -> KubeConfig:
        """A copy for an API client on another thread's event loop (leader
        election's): its own reload lock (an asyncio lock serves one loop) and
        its own look at the files, so that each copy sees a change and follows
        it; the same credentials, whose renewal is thread-safe."""
        return dataclasses.replace(self, files=copy.copy(self.files))

    async def auth_headers(self) -> dict[str, str]:
        """Authorization for the next request, renewed when its source says so,
        and the identity it acts as with `--as`. The API server derives a service
        account's groups itself, as for its token; sending none asks the local
        credentials for no more than `impersonate` on that service account."""
        header = await self.credentials.header()
        headers = {"Authorization": header} if header else {}
        if self.impersonate:
            headers["Impersonate-User"] = self.impersonate
        return headers

    async def refresh_credentials(self, rejected: Mapping[str, str]) -> bool:
        """The API server answered 401 to a request sent with `rejected`
        headers: renew the credential now (re-run the exec plugin, re-read the
        token file). True when a retry would send different credentials."""
        return await self.credentials.refresh(rejected.get("Authorization"))


def api_server_context(cafile: str | None) -> ssl.SSLContext:
    """Verifies the API server as client-go does. Python 3.13 verifies
    strictly by default (VERIFY_X509_STRICT) and refuses a CA or certificate
    without key identifiers, which Go accepts and some clusters' older,
    self-made CAs lack: the operator must reach every API server kubectl does."""
    context = ssl.create_default_context(cafile=cafile)
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _ssl_context(
    configuration: k8s_client.Configuration, scratch: str, certificate: tuple[str, str] | None
) -> ssl.SSLContext | bool:
    if not configuration.host.startswith("https"):
        return False
    context = api_server_context(configuration.ssl_ca_cert or None)
    if certificate is not None:
        # An exec plugin's certificate: as the library, it takes the place of the user's.
        cert_file, key_file = Path(scratch, "exec-client.crt"), Path(scratch, "exec-client.key")
        cert_file.write_text(certificate[0])
        key_file.write_text(certificate[1])
        context.load_cert_chain(cert_file, key_file)
    elif configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.tls_server_name:
        # aiohttp has no SNI override; the name is checked against the CA-signed cert.
        context.check_hostname = False
    return context


def _library_header(path: str, context: str | None) -> str | None:
    """The `kubernetes` package's own reading of the user's credentials (an
    OIDC id-token it renews through the identity provider when expired)."""
    configuration = k8s_client.Configuration()
    scratch = tempfile.mkdtemp(prefix="ansible-operator-kubeconfig-")
    try:
        k8s_config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=scratch,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return configuration.get_api_key_with_prefix("BearerToken", alias="authorization")


def _selected(merged: Any, context: str | None) -> tuple[Any, Any, Any]:
    """The chosen context, its user entry (None: no user) and its cluster."""
    chosen = merged["contexts"].get_with_name(context or merged["current-context"])
    user_name = chosen["context"].safe_get("user")
    user_entry = None
    if user_name and merged.safe_get("users"):
        user_entry = merged["users"].get_with_name(user_name, safe=True)
    cluster = merged["clusters"].get_with_name(chosen["context"]["cluster"])["cluster"]
    return chosen, user_entry, cluster


def _from_kubeconfig(path: str, context: str | None) -> KubeConfig:
    # Looked at before reading: a change made while we read is seen next time.
    files = SourceFiles([Path(p).expanduser() for p in path.split(os.pathsep) if p])
    # Certificates embedded in the kubeconfig are written out by the library;
    # they go in a private directory that is gone once the SSL context holds them.
    scratch = tempfile.mkdtemp(prefix="ansible-operator-kubeconfig-")
    try:
        merged = KubeConfigMerger(path).config
        if merged is None:
            raise ConfigException(f"no kubeconfig file found at {path}")
        chosen, user_entry, cluster = _selected(merged, context)
        credentials: Credentials | None = None
        configuration = k8s_client.Configuration()
        if user_entry is not None:
            user = user_entry["user"]
            where = f"kubeconfig {user_entry.path or path}: user {user_entry['name']!r}"
            base = Path(user_entry.path).parent if user_entry.path else Path.cwd()
            credentials = user_credentials(
                user, base, cluster, where, lambda: _library_header(path, context)
            )
            if credentials is not None:
                user_entry.value["user"] = {
                    key: value for key, value in user.value.items() if key not in CREDENTIAL_KEYS
                }
        k8s_config.load_kube_config_from_dict(
            merged,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=scratch,
        )
        if credentials is None:
            # No credentials, client certificates, or an auth-provider the
            # library implements (gcp): read as the library's own client does.
            credentials = (
                LibraryCredentials(configuration, f"kubeconfig {path}")
                if configuration.api_key or configuration.refresh_api_key_hook
                else NoCredentials(f"kubeconfig {path}")
            )
        certificate = (
            credentials.client_certificate if isinstance(credentials, ExecPlugin) else None
        )
        context_ssl = _ssl_context(configuration, scratch, certificate)
    except CredentialError as error:
        raise KubeConfigError(str(error)) from error
    except (ConfigException, OSError, ssl.SSLError, yaml.YAMLError) as error:
        raise KubeConfigError(f"cannot use kubeconfig {path}: {error}") from error
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return KubeConfig(
        server=configuration.host,
        ssl=context_ssl,
        namespace=chosen["context"].safe_get("namespace") or "default",
        source=path,
        credentials=credentials,
        context=context,
        files=files,
    )


def _join_host_port(host: str, port: str) -> str:
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


def in_cluster(
    root: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] | None = None
) -> KubeConfig:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, and `token`,
    `ca.crt`, `namespace` under `root`. The token is re-read as the kubelet
    rotates it (projected tokens live an hour or so)."""
    environ = os.environ if environ is None else environ
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeConfigError(
            "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "must both be set"
        )
    ca_file = root / "ca.crt"
    try:
        credentials = TokenFile(root / "token", f"in-cluster service account ({root})")
        context = api_server_context(str(ca_file))
    except CredentialError as error:
        raise KubeConfigError(f"in-cluster configuration: {error}") from error
    except (OSError, ssl.SSLError) as error:
        raise KubeConfigError(f"in-cluster configuration: CA file {ca_file}: {error}") from error
    namespace_file = root / "namespace"
    namespace = "default"
    if namespace_file.exists():
        namespace = namespace_file.read_text().strip() or "default"
    return KubeConfig(
        server="https://" + _join_host_port(host, port),
        ssl=context,
        namespace=namespace,
        source="in-cluster",
        credentials=credentials,
    )


def from_client_configuration(
    configuration: k8s_client.Configuration, source: str = "kubernetes.client.Configuration"
) -> KubeConfig:
    """A KubeConfig for a `kubernetes.client.Configuration` built elsewhere
    (embedding): its api_key, api_key_prefix and refresh hook are honoured."""
    scratch = tempfile.mkdtemp(prefix="ansible-operator-kubeconfig-")
    try:
        context = _ssl_context(configuration, scratch, None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return KubeConfig(
        server=configuration.host,
        ssl=context,
        source=source,
        credentials=LibraryCredentials(configuration, source),
    )


def load_config(path: str | Path | None = None, context: str | None = None) -> KubeConfig:
    """As controller-runtime: the given kubeconfig, then $KUBECONFIG, then the
    in-cluster service account, then ~/.kube/config."""
    if path is not None:
        return _from_kubeconfig(str(path), context)
    env_path = os.environ.get("KUBECONFIG")
    if env_path:
        return _from_kubeconfig(env_path, context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    home = Path("~/.kube/config").expanduser()
    if home.exists():
        return _from_kubeconfig(str(home), context)
    raise KubeConfigError(
        "no cluster configured: pass --kubeconfig, set KUBECONFIG, run in a cluster, "
        "or create ~/.kube/config (`ansible-operator cluster up` starts a local one)"
    )
