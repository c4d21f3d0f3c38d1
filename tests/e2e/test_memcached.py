"""The Memcached quickstart sample: roles/memcached, roles/memcached_finalizer."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import (
    condition_of,
    eventually,
    get_custom,
    wait_for_condition,
)

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = "cache.example.com", "v1alpha1", "memcacheds"


@pytest.fixture(scope="module")
def operator(sample_operator) -> OperatorProcess:
    return sample_operator("cache.example.com_memcacheds.yaml")


def memcached(api: client.ApiClient, namespace: str, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Memcached",
        "metadata": {"name": name},
        "spec": spec,
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )


def wait_successful(api: client.ApiClient, namespace: str, name: str, **kwargs: Any):
    return wait_for_condition(api, GROUP, VERSION, PLURAL, namespace, name, "Successful", **kwargs)


def deployment(api: client.ApiClient, namespace: str, name: str) -> client.V1Deployment:
    return client.AppsV1Api(api).read_namespaced_deployment(name, namespace)


def test_create_runs_a_deployment_owned_by_the_memcached(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    memcached(kube_api, kube_namespace, "cache", size=2)
    obj = wait_successful(kube_api, kube_namespace, "cache")

    found = deployment(kube_api, kube_namespace, "cache")
    assert found.spec.replicas == 2
    assert found.spec.template.spec.containers[0].image == "memcached:1.6-alpine"
    [owner] = found.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("Memcached", "cache", obj["metadata"]["uid"])
    assert owner.controller is True
    assert "cache.example.com/finalizer" in obj["metadata"]["finalizers"]
    # no kubelet runs here, so no Pod ever starts: not available, but not a failure
    assert obj["status"]["replicas"] == 2
    assert obj["status"]["availableReplicas"] == 0
    available = condition_of(obj, "Available")
    assert (available["status"], available["reason"]) == ("False", "Progressing")
    assert available["message"] == "0 of 2 replicas available"


def test_size_defaults_to_one(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    memcached(kube_api, kube_namespace, "small")
    wait_successful(kube_api, kube_namespace, "small")
    assert deployment(kube_api, kube_namespace, "small").spec.replicas == 1


def test_size_change_updates_the_replicas(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    memcached(kube_api, kube_namespace, "grow", size=1)
    wait_successful(kube_api, kube_namespace, "grow")
    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, PLURAL, "grow", {"spec": {"size": 3}}
    )
    wait_successful(
        kube_api,
        kube_namespace,
        "grow",
        predicate=lambda o: o["status"].get("observedGeneration") == 2,
    )
    assert deployment(kube_api, kube_namespace, "grow").spec.replicas == 3


def test_available_follows_the_deployment_status(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    memcached(kube_api, kube_namespace, "ready", size=2)
    wait_successful(kube_api, kube_namespace, "ready")
    # stand in for the Deployment controller and kubelet: both replicas available
    client.AppsV1Api(kube_api).patch_namespaced_deployment_status(
        "ready",
        kube_namespace,
        {"status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}},
    )
    obj = wait_for_condition(
        kube_api, GROUP, VERSION, PLURAL, kube_namespace, "ready", "Available", "True"
    )
    assert condition_of(obj, "Available")["reason"] == "MinimumReplicasAvailable"
    assert obj["status"]["availableReplicas"] == 2


def test_delete_runs_the_finalizer_then_the_object_is_gone(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    memcached(kube_api, kube_namespace, "bye")
    uid = wait_successful(kube_api, kube_namespace, "bye")["metadata"]["uid"]
    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, PLURAL, "bye"
    )
    eventually(
        lambda: get_custom(kube_api, GROUP, VERSION, PLURAL, kube_namespace, "bye") is None,
        what="memcached/bye deleted (finalizer removed)",
        describe=lambda: operator.logs[-3000:],
    )

    def cleanup_events() -> list[client.CoreV1Event]:
        return [
            e
            for e in client.CoreV1Api(kube_api).list_namespaced_event(kube_namespace).items
            if e.involved_object.uid == uid and e.reason == "CleanedUp"
        ]

    events = eventually(cleanup_events, what="the finalizer's CleanedUp event")
    assert events[0].message == "memcached bye cleaned up before deletion"
