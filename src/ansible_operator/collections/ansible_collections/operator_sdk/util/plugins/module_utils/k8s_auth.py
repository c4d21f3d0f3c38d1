"""Connection options of k8s_status and k8s_event, as the original collection
(and kubernetes.core) names them, with the same K8S_AUTH_* environment
fallbacks, so a run's kubeconfig, which points at the operator's proxy, is
picked up by default.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

import base64

from ansible.module_utils.basic import env_fallback

try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.discovery import Discoverer
except ImportError:  # reported by the module with missing_required_lib
    k8s_client = k8s_config = DynamicClient = None
    Discoverer = object


def _option(kind, *env, **extra):
    option = {"type": kind}
    option.update(extra)
    if env:
        # The option's own name first, then the kubernetes client's name for it.
        option["fallback"] = (env_fallback, list(env))
    return option


AUTH_ARGS = {
    "kubeconfig": _option("path", "K8S_AUTH_KUBECONFIG"),
    "context": _option("str", "K8S_AUTH_CONTEXT"),
    "host": _option("str", "K8S_AUTH_HOST"),
    "api_key": _option("str", "K8S_AUTH_API_KEY", no_log=True),
    "username": _option("str", "K8S_AUTH_USERNAME"),
    "password": _option("str", "K8S_AUTH_PASSWORD", no_log=True),
    "validate_certs": _option(
        "bool", "K8S_AUTH_VALIDATE_CERTS", "K8S_AUTH_VERIFY_SSL", aliases=["verify_ssl"]
    ),
    "ca_cert": _option("path", "K8S_AUTH_CA_CERT", "K8S_AUTH_SSL_CA_CERT", aliases=["ssl_ca_cert"]),
    "client_cert": _option(
        "path", "K8S_AUTH_CLIENT_CERT", "K8S_AUTH_CERT_FILE", aliases=["cert_file"]
    ),
    "client_key": _option("path", "K8S_AUTH_CLIENT_KEY", "K8S_AUTH_KEY_FILE", aliases=["key_file"]),
    "proxy": _option("str", "K8S_AUTH_PROXY"),
    "persist_config": _option("bool", "K8S_AUTH_PERSIST_CONFIG"),
}


def auth_argument_spec():
    return {name: dict(option) for name, option in AUTH_ARGS.items()}


class KubeconfigError(Exception):
    """The kubeconfig (or in-cluster configuration) could not be loaded."""


def _load_configuration(params):
    """A client Configuration from a kubeconfig or the pod's service account,
    unless the task's own parameters are enough to authenticate."""
    configuration = k8s_client.Configuration()
    host = params.get("host")
    if host and (params.get("api_key") or (params.get("username") and params.get("password"))):
        return configuration
    kubeconfig, context = params.get("kubeconfig"), params.get("context")
    persist = bool(params.get("persist_config"))
    try:
        if kubeconfig or context:
            k8s_config.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=persist,
            )
            return configuration
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
            return configuration
        except k8s_config.ConfigException:
            pass
        try:
            k8s_config.load_kube_config(client_configuration=configuration, persist_config=persist)
        except Exception:
            if not host:
                raise
            # The task names the server (and its certificates) itself: no
            # configuration to start from is no error. The original fails here.
            return k8s_client.Configuration()
    except Exception as error:
        raise KubeconfigError(str(error)) from error
    return configuration


def api_client(params):
    """A kubernetes ApiClient from the module's connection options: the task's
    values override what the kubeconfig says."""
    configuration = _load_configuration(params)
    if params.get("host"):
        configuration.host = params["host"]
    if params.get("api_key"):
        configuration.api_key = {"authorization": "Bearer " + params["api_key"]}
    elif params.get("username") and params.get("password"):
        # The client keeps username/password but never sends them: send them
        # as basic auth ourselves.
        pair = f"{params['username']}:{params['password']}".encode()
        configuration.api_key = {"authorization": "Basic " + base64.b64encode(pair).decode()}
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = params["validate_certs"]
    if params.get("ca_cert"):
        configuration.ssl_ca_cert = params["ca_cert"]
    if params.get("client_cert"):
        configuration.cert_file = params["client_cert"]
    if params.get("client_key"):
        configuration.key_file = params["client_key"]
    if params.get("proxy"):
        configuration.proxy = params["proxy"]
    return k8s_client.ApiClient(configuration)


class _NothingUpFront(Discoverer):
    """Discovery of nothing until a module names its group version.

    The library's discoverers ask for the server's version and the list of
    every API group before anything else (each module run: two requests
    through the operator's proxy before the module's own), and the default one
    keeps what it learns in one JSON file in the temporary directory that every
    module run of every run reads and, whenever it learnt a group the file
    lacked, rewrites whole: concurrent runs rewrite it in turn. Our modules
    need one kind each: k8s_lookup.find_resource reads its group version, one
    request (`get_resources_for_api_version`, the library's own).
    """

    def __init__(self, client, cache_file):
        self.client = client
        self._cache = {}

    def discover(self):
        pass

    def search(self, **kwargs):
        raise NotImplementedError("look resources up with k8s_lookup.find_resource")


def dynamic_client(params):
    """A kubernetes DynamicClient from the module's connection options.

    Raises KubeconfigError when no configuration could be loaded; anything
    else (the API server unreachable, ...) as the client raises it.
    """
    return DynamicClient(api_client(params), discoverer=_NothingUpFront)
