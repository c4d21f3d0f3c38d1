"""The versions a run gets: Python, ansible-core, ansible-runner, the
kubernetes.core collection. Read from package metadata, without importing
Ansible (the operator stays small)."""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("ansible-core", "ansible-runner", "Jinja2", "pexpect", "kubernetes")
COLLECTIONS = (("kubernetes", "core"),)
DEFAULT_COLLECTION_ROOTS = ("~/.ansible/collections", "/usr/share/ansible/collections")


def _collection_version(namespace: str, name: str) -> str | None:
    roots = [Path(entry) for entry in sys.path if entry]
    roots += [Path(root).expanduser() for root in DEFAULT_COLLECTION_ROOTS]
    for root in roots:
        manifest = root / "ansible_collections" / namespace / name / "MANIFEST.json"
        try:
            return str(json.loads(manifest.read_text())["collection_info"]["version"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def installed_versions() -> dict[str, str]:
    found = {"python": f"{platform.python_version()} ({sys.executable})"}
    for package in PACKAGES:
        try:
            found[package.lower()] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package.lower()] = "not installed"
    for namespace, name in COLLECTIONS:
        found[f"{namespace}.{name}"] = _collection_version(namespace, name) or "not found"
    return found


def one_line(versions: dict[str, str]) -> str:
    return " ".join(f"{name}={value.split(' ')[0]}" for name, value in versions.items())
