"""The deploy manifests (config/) are accepted by a real API server: CRDs
installed, then RBAC, the operator's Deployment and the sample objects
admitted by a server-side dry run (schemas, RBAC escalation checks included);
so is the shard-ring variant (config/sharding) as kustomize renders it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from ansible_operator.testing.manifests import apply_manifests, documents
from kustomize_render import render

pytestmark = pytest.mark.cluster

CONFIG = Path(__file__).resolve().parents[2] / "config"
FOLDERS = ("rbac", "manager", "samples", "webhook")
NAMESPACE = "ansible-operator-system"


def test_manifests_apply_to_the_control_plane(kube_api: client.ApiClient) -> None:
    crds = sorted((CONFIG / "crd" / "bases").glob("*.yaml"))
    for path in crds:
        apply_manifests(kube_api, path)
    core = client.CoreV1Api(kube_api)
    # A dry run creates nothing, so the namespaced objects need their namespaces for real.
    wanted = {
        doc["metadata"]["namespace"]
        for folder in FOLDERS
        for path in (CONFIG / folder).glob("*.yaml")
        for doc in documents(path)
        if doc.get("kind") != "Namespace" and doc["metadata"].get("namespace")
    }
    existing = {ns.metadata.name for ns in core.list_namespace().items}
    for name in sorted(wanted - existing):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    checked: list[str] = []
    for folder in FOLDERS:
        for path in sorted((CONFIG / folder).glob("*.yaml")):
            for applied in apply_manifests(kube_api, path, dry_run=True):
                checked.append(f"{applied['kind']}/{applied['metadata']['name']}")
    kinds = {entry.split("/")[0] for entry in checked}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds
    expected = sum(len(documents(p)) for f in FOLDERS for p in (CONFIG / f).glob("*.yaml"))
    assert len(checked) == expected
    deployment = client.AppsV1Api(kube_api).list_namespaced_deployment(NAMESPACE).items
    assert deployment == [], "a dry run stores nothing"


def test_the_shard_ring_overlay_applies_too(kube_api: client.ApiClient) -> None:
    docs = render(CONFIG / "sharding")  # what `kubectl kustomize` makes of it
    core = client.CoreV1Api(kube_api)
    if NAMESPACE not in {ns.metadata.name for ns in core.list_namespace().items}:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))

    applied = apply_manifests(kube_api, yaml.safe_dump_all(docs), dry_run=True)

    assert len(applied) == len(docs)
    [deployment] = [obj for obj in applied if obj["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--shard-ring=ansible-operator-samples" in container["args"]
    assert client.AppsV1Api(kube_api).list_namespaced_deployment(NAMESPACE).items == []
