"""Kubeconfig files: content and permissions."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig


def test_kubeconfig_with_token_and_ca_is_private(tmp_path: Path) -> None:
    config = build_kubeconfig(
        "https://127.0.0.1:6443", ca_pem=b"CA", token="secret", namespace="ns"
    )
    path = write_kubeconfig(tmp_path / "kubeconfig", config)
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = yaml.safe_load(path.read_text())
    assert loaded["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(loaded["clusters"][0]["cluster"]["certificate-authority-data"]) == b"CA"
    assert loaded["users"][0]["user"] == {"token": "secret"}
    assert loaded["contexts"][0]["context"]["namespace"] == "ns"
