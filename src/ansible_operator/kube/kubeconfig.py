"""Writing kubeconfig files (for the local control plane's users and for runs)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.values.private_files import write_private


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build_kubeconfig(
    server: str,
    *,
    name: str = "local",
    ca_pem: bytes | None = None,
    client_cert_pem: bytes | None = None,
    client_key_pem: bytes | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = _b64(ca_pem)
    user: dict[str, Any] = {}
    if client_cert_pem is not None and client_key_pem is not None:
        user["client-certificate-data"] = _b64(client_cert_pem)
        user["client-key-data"] = _b64(client_key_pem)
    if token is not None:
        user["token"] = token
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": context}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, config: dict[str, Any]) -> Path:
    """Kubeconfigs hold credentials: written private (0600)."""
    write_private(path, yaml.safe_dump(config, sort_keys=False).encode())
    return path
