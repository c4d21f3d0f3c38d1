"""Kubeconfig files for the credential tests of two tiers (tests/unit and, for
exec plugins, tests/processes), and a clock they can move."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.serving.pki import create_ca

SERVER = "https://127.0.0.1:6443"
UTC = datetime.UTC


def write_kubeconfig(directory: Path, user: dict[str, Any], **context: str) -> Path:
    ca = create_ca(directory / "pki")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "test",
                "cluster": {
                    "server": SERVER,
                    "certificate-authority-data": base64.b64encode(ca.cert_pem()).decode(),
                },
            }
        ],
        "users": [{"name": "operator", "user": user}],
        "contexts": [
            {"name": "test", "context": {"cluster": "test", "user": "operator", **context}}
        ],
        "current-context": "test",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


class Clock:
    def __init__(self) -> None:
        self.offset = datetime.timedelta(0)

    def __call__(self) -> datetime.datetime:
        return datetime.datetime.now(tz=UTC) + self.offset
