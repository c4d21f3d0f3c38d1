"""Where the API server is and how to authenticate to it.

The `kubernetes` package does the reading (kubeconfig with contexts, exec and
OIDC plugins, in-cluster service account); we turn its result into what our
aiohttp traffic needs: a base URL, an SSL context and fresh auth headers.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeConfigError(RuntimeError):
    """No usable cluster configuration; the message says what was tried."""


@dataclass
class KubeConfig:
    server: str
    ssl: ssl.SSLContext | bool
    namespace: str = "default"
    source: str = ""
    _configuration: k8s_client.Configuration | None = field(default=None, repr=False)
    _static_headers: dict[str, str] = field(default_factory=dict, repr=False)

    async def auth_headers(self) -> dict[str, str]:
        """Authorization for the next request; tokens from exec/OIDC plugins and
        projected service-account tokens are refreshed as the client library does."""
        configuration = self._configuration
        if configuration is None:
            return dict(self._static_headers)
        hook: Callable[[k8s_client.Configuration], None] | None = getattr(
            configuration, "refresh_api_key_hook", None
        )
        if hook is not None:
            # Exec plugins may run a command: keep the event loop free.
            await asyncio.to_thread(hook, configuration)
        headers = dict(self._static_headers)
        token = configuration.get_api_key_with_prefix("authorization")
        if token:
            headers["Authorization"] = token
        elif configuration.username and configuration.password:
            headers["Authorization"] = configuration.get_basic_auth_token()
        return headers


def _ssl_context(configuration: k8s_client.Configuration) -> ssl.SSLContext | bool:
    if not configuration.host.startswith("https"):
        return False
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.tls_server_name:
        # aiohttp has no SNI override; the name is checked against the CA-signed cert.
        context.check_hostname = False
    return context


def _kubeconfig_namespace(path: str, context: str | None) -> str:
    try:
        contexts, active = k8s_config.list_kube_config_contexts(config_file=path)
    except ConfigException:
        return "default"
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts if c.get("name") == context), active)
    return ((chosen or {}).get("context") or {}).get("namespace") or "default"


def _from_kubeconfig(path: str, context: str | None) -> KubeConfig:
    configuration = k8s_client.Configuration()
    # Certificates embedded in the kubeconfig are written out by the library;
    # they go in a private directory that is gone once the SSL context holds them.
    scratch = tempfile.mkdtemp(prefix="ansible-operator-kubeconfig-")
    try:
        k8s_config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=scratch,
        )
        context_ssl = _ssl_context(configuration)
    except (ConfigException, OSError, ssl.SSLError) as error:
        raise KubeConfigError(f"cannot use kubeconfig {path}: {error}") from error
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return KubeConfig(
        server=configuration.host,
        ssl=context_ssl,
        namespace=_kubeconfig_namespace(path, context),
        source=path,
        _configuration=configuration,
    )


def _in_cluster() -> KubeConfig:
    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)
    except ConfigException as error:
        raise KubeConfigError(f"in-cluster configuration: {error}") from error
    namespace = "default"
    if IN_CLUSTER_NAMESPACE.exists():
        namespace = IN_CLUSTER_NAMESPACE.read_text().strip() or "default"
    return KubeConfig(
        server=configuration.host,
        ssl=_ssl_context(configuration),
        namespace=namespace,
        source="in-cluster",
        _configuration=configuration,
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
        return _in_cluster()
    home = Path("~/.kube/config").expanduser()
    if home.exists():
        return _from_kubeconfig(str(home), context)
    raise KubeConfigError(
        "no cluster configured: pass --kubeconfig, set KUBECONFIG, run in a cluster, "
        "or create ~/.kube/config (`ansible-operator cluster up` starts a local one)"
    )
