"""Against a real API server: a repeated Event is one Event whose count grows,
as `kubectl describe` shows it (`x3 over ...`), not copies."""

from __future__ import annotations

import pytest

from ansible_operator.cluster import Cluster
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import load_config
from ansible_operator.kube.types import Resource
from ansible_operator.reconciler.events import EVENTS, record_event

pytestmark = pytest.mark.cluster

CONFIGMAPS = Resource(
    group="",
    version="v1",
    kind="ConfigMap",
    plural="configmaps",
    namespaced=True,
    verbs=frozenset({"create", "get"}),
)


async def test_a_repeated_warning_is_one_event_with_a_count(
    kube_cluster: Cluster, kube_namespace: str
) -> None:
    config = load_config(kube_cluster.kubeconfig)
    async with ApiClient(config) as api:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "subject"}}
        subject = await api.create(CONFIGMAPS, body, namespace=kube_namespace)
        for _ in range(3):
            await record_event(api, subject, "Failed", "cannot create deployments", warning=True)

        listed = await api.list(EVENTS, kube_namespace)

    events = [e for e in listed["items"] if e["involvedObject"]["name"] == "subject"]
    assert [(e["reason"], e["type"], e["count"]) for e in events] == [("Failed", "Warning", 3)]
