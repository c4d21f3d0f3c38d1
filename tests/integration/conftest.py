"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.testing.manifests import apply_manifests

OPERATOR = Path(__file__).resolve().parent.parent / "operator"


@pytest.fixture(scope="session")
def test_crds(kube_api: client.ApiClient) -> None:
    """The test operator's CRDs (tests/operator/crds.yaml), served."""
    apply_manifests(kube_api, OPERATOR / "crds.yaml")
