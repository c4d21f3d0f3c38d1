"""`kubectl apply -f config/samples/` works on a cluster with the CRDs and
nothing else: every namespace a sample names is made by a sample."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, dynamic

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests, documents

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"


def sample_documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(SAMPLES.glob("*.yaml")) for doc in documents(path)]


@pytest.fixture
def cleanup(kube_api: client.ApiClient) -> Iterator[None]:
    """The samples' objects (in `default` and the namespaces they make) deleted afterwards."""
    yield
    resources = dynamic.DynamicClient(kube_api).resources
    for doc in reversed(sample_documents()):
        resource = resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        namespace = (doc["metadata"].get("namespace") or "default") if resource.namespaced else None
        with contextlib.suppress(client.ApiException):
            resource.delete(name=doc["metadata"]["name"], namespace=namespace)


def test_the_samples_apply_on_a_cluster_with_only_the_crds(
    kube_cluster: Cluster, kube_api: client.ApiClient, cleanup: None
) -> None:
    for crd in sorted((ROOT / "config" / "crd" / "bases").glob("*.yaml")):
        apply_manifests(kube_api, crd)
    kubectl = shutil.which("kubectl")
    if kubectl is None:  # kubectl's order: the files by name, each file's documents in turn
        for path in sorted(SAMPLES.glob("*.yaml")):
            apply_manifests(kube_api, path)
        return
    result = subprocess.run(
        [kubectl, f"--kubeconfig={kube_cluster.kubeconfig}", "apply", "-f", str(SAMPLES)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
