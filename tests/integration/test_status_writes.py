"""Status writes against the real API server, from the cache's copy of the object:
what another writer put in the status meanwhile is never lost."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.cluster import Cluster
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import load_config
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Resource
from ansible_operator.reconciler.conditions import Condition
from ansible_operator.reconciler.status import write_conditions

pytestmark = pytest.mark.cluster

GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"
RUNNING = [Condition("Running", "True", "Running", "Running reconciliation")]
DONE = [Condition("Running", "False", "Successful", "Awaiting next reconciliation")]


async def greeting(api: ApiClient, namespace: str, name: str) -> tuple[Resource, dict[str, Any]]:
    """A new Greeting, as the API server stored it."""
    greetings = await RestMapper(api).resource_for(GROUP, VERSION, "Greeting")
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Greeting", "metadata": {"name": name}}
    return greetings, await api.create(greetings, body, namespace)


def conditions_of(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["reason"] for c in (obj.get("status") or {}).get("conditions") or []}


async def test_a_write_from_a_stale_copy_keeps_what_another_writer_wrote(
    kube_cluster: Cluster, kube_namespace: str, test_crds: None
) -> None:
    async with ApiClient(load_config(kube_cluster.kubeconfig)) as api:
        greetings, created = await greeting(api, kube_namespace, "g")
        fresh = await write_conditions(api, greetings, kube_namespace, "g", RUNNING, known=created)
        assert conditions_of(fresh) == {"Running": "Running"}

        # A role writes its own status key (as k8s_status does) after our copy was taken.
        role_wrote = await api.patch(
            greetings,
            "g",
            {"status": {"greeted": "yes"}},
            namespace=kube_namespace,
            subresource="status",
            patch_type="merge",
        )
        assert role_wrote["metadata"]["resourceVersion"] != fresh["metadata"]["resourceVersion"]

        written = await write_conditions(
            api, greetings, kube_namespace, "g", DONE, observed_generation=1, known=fresh
        )
        stored = await api.get(greetings, "g", kube_namespace)
        assert stored == written
        assert stored["status"]["greeted"] == "yes"
        assert conditions_of(stored) == {"Running": "Successful"}
        assert stored["status"]["observedGeneration"] == 1


async def test_a_copy_that_already_says_it_still_gets_written_if_the_server_does_not(
    kube_cluster: Cluster, kube_namespace: str, test_crds: None
) -> None:
    async with ApiClient(load_config(kube_cluster.kubeconfig)) as api:
        greetings, created = await greeting(api, kube_namespace, "h")
        # A copy claiming the conditions are there (a cache that is wrong): still written.
        claimed = {
            **created,
            "status": {"conditions": [c.to_dict("2026-01-01T00:00:00Z") for c in RUNNING]},
        }
        await write_conditions(api, greetings, kube_namespace, "h", RUNNING, known=claimed)
        stored = await api.get(greetings, "h", kube_namespace)
        assert conditions_of(stored) == {"Running": "Running"}
