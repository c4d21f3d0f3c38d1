"""Documentation of the connection options shared by k8s_status and k8s_event."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file (C(K8S_AUTH_KUBECONFIG)). Inside an ansible-operator run this
        is the run's kubeconfig, which points at the operator's proxy.
      - Without I(kubeconfig) or I(context), the in-cluster configuration is tried first, then
        the default kubeconfig; with I(host) and I(api_key) (or I(username) and I(password)),
        no configuration is loaded.
    type: path
  context:
    description: The kubeconfig context to use (C(K8S_AUTH_CONTEXT)).
    type: str
  host:
    description: The API server URL (C(K8S_AUTH_HOST)).
    type: str
  api_key:
    description: A bearer token for the API server (C(K8S_AUTH_API_KEY)).
    type: str
  username:
    description: A user name for HTTP basic authentication (C(K8S_AUTH_USERNAME)).
    type: str
  password:
    description: The password for I(username) (C(K8S_AUTH_PASSWORD)).
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's certificate (C(K8S_AUTH_VALIDATE_CERTS) or
        C(K8S_AUTH_VERIFY_SSL)).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: A CA bundle for the API server (C(K8S_AUTH_CA_CERT) or C(K8S_AUTH_SSL_CA_CERT)).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description: A client certificate (C(K8S_AUTH_CLIENT_CERT) or C(K8S_AUTH_CERT_FILE)).
    type: path
    aliases: [cert_file]
  client_key:
    description: The key of I(client_cert) (C(K8S_AUTH_CLIENT_KEY) or C(K8S_AUTH_KEY_FILE)).
    type: path
    aliases: [key_file]
  proxy:
    description: An HTTP proxy URL to reach the API server through (C(K8S_AUTH_PROXY)).
    type: str
  persist_config:
    description:
      - Write refreshed tokens back to the kubeconfig file (C(K8S_AUTH_PERSIST_CONFIG)).
    type: bool
requirements:
  - python >= 3.9
  - kubernetes >= 25.3.0
"""
