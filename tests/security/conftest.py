"""Fixtures shared by the security tests: the CRDs of the operators they attack."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.testing.manifests import apply_manifests

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def attack_crds(kube_api: client.ApiClient) -> None:
    """The CRDs of the operator under tests/security/runtime_attacks."""
    apply_manifests(kube_api, HERE / "runtime_attacks" / "crds.yaml")


@pytest.fixture(scope="module")
def test_crds(kube_api: client.ApiClient) -> None:
    """The CRDs of the test operator (tests/operator)."""
    apply_manifests(kube_api, HERE.parent / "operator" / "crds.yaml")
