"""Connection options shared by the collection's modules, as kubernetes.core
names them (and with the same K8S_AUTH_* environment fallbacks), so a run's
kubeconfig, which points at the operator's proxy, is picked up by default."""

from __future__ import annotations

from ansible.module_utils.basic import env_fallback

try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.discovery import LazyDiscoverer
except ImportError:  # reported by the module with missing_required_lib
    k8s_client = k8s_config = DynamicClient = None
    LazyDiscoverer = object

AUTH_ARGS = {
    "kubeconfig": {"type": "path", "fallback_env": "K8S_AUTH_KUBECONFIG"},
    "context": {"type": "str", "fallback_env": "K8S_AUTH_CONTEXT"},
    "host": {"type": "str", "fallback_env": "K8S_AUTH_HOST"},
    "api_key": {"type": "str", "no_log": True, "fallback_env": "K8S_AUTH_API_KEY"},
    "validate_certs": {
        "type": "bool",
        "aliases": ["verify_ssl"],
        "fallback_env": "K8S_AUTH_VERIFY_SSL",
    },
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"], "fallback_env": "K8S_AUTH_SSL_CA_CERT"},
}


def with_env_fallbacks(spec):
    """Turn our ``fallback_env`` shorthand into AnsibleModule's ``fallback``."""
    result = {}
    for name, option in spec.items():
        option = dict(option)
        env = option.pop("fallback_env", None)
        if env:
            option["fallback"] = (env_fallback, [env])
        result[name] = option
    return result


def api_client(params):
    """A kubernetes ApiClient from the module's auth options."""
    kubeconfig, host = params.get("kubeconfig"), params.get("host")
    configuration = k8s_client.Configuration()
    if kubeconfig or not host:
        try:
            k8s_config.load_kube_config(
                config_file=kubeconfig,
                context=params.get("context"),
                client_configuration=configuration,
                persist_config=False,
            )
        except k8s_config.ConfigException:
            if kubeconfig:
                raise
            k8s_config.load_incluster_config(client_configuration=configuration)
    if host:
        configuration.host = host
    if params.get("api_key"):
        configuration.api_key = {"authorization": "Bearer " + params["api_key"]}
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = params["validate_certs"]
    if params.get("ca_cert"):
        configuration.ssl_ca_cert = params["ca_cert"]
    return k8s_client.ApiClient(configuration)


class _DiscoveryWithoutFile(LazyDiscoverer):
    """Discovery of just what the module asks for, kept in memory.

    The library's default keeps discovery in one JSON file in the temporary
    directory that every module run of every run reads and, whenever it
    learnt a group the file lacked, rewrites whole: concurrent runs rewrite
    it in turn. Our modules need one kind each: a few small requests instead.
    """

    def __init__(self, client, cache_file):
        # A file that never exists: nothing read, always discovered afresh.
        super().__init__(client, "/nonexistent/ansible-operator/discovery.json")

    def _write_cache(self):
        pass


def dynamic_client(params):
    """A kubernetes DynamicClient from the module's auth options."""
    return DynamicClient(api_client(params), discoverer=_DiscoveryWithoutFile)


def auth_argument_spec():
    return with_env_fallbacks(AUTH_ARGS)
