"""Project scaffolding: `ansible-operator init` and `ansible-operator create api`.

Writes an Operator SDK-style Ansible operator project (watches.yaml, roles/,
playbooks/, config/ manifests with kustomizations, a Dockerfile, a Makefile with
Operator SDK's targets, and pytest tests that run against a real API server
through our pytest plugin). Existing files are never overwritten; the files
`create api` edits keep their comments (yaml_edit.py).
"""

from __future__ import annotations

import re

__all__ = ["plural_of", "snake_name"]


def plural_of(kind: str) -> str:
    """The resource name of `kind`: lower case, English-ish plural (as kubebuilder does)."""
    lower = kind.lower()
    if re.search(r"[^aeiou]y$", lower):
        return lower[:-1] + "ies"
    if re.search(r"(s|x|ch|sh)$", lower):
        return lower + "es"
    return lower + "s"


def snake_name(kind: str) -> str:
    """`kind` lower-cased, as used for role, playbook and test names."""
    return kind.lower()
