"""Cluster API style handshake: a `Cluster` adopts the provider's `SampleCluster`;
the provider builds network, bastion and API server load balancer in order,
waits on the load balancer's address, then reports ready; the Cluster copies
the API endpoints. Roles capi_cluster, capi_samplecluster(_delete)."""

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

CAPI, INFRA, VERSION = "cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "v1beta1"
FINALIZER = "infrastructure.cluster.x-k8s.io/samplecluster"
WAITING = "waiting on API server load balancer"


@pytest.fixture(scope="module")
def operator(sample_operator: Any) -> OperatorProcess:
    return sample_operator(
        "cluster.x-k8s.io_clusters.yaml", "infrastructure.cluster.x-k8s.io_sampleclusters.yaml"
    )


@pytest.fixture
def logs_on_failure(operator: OperatorProcess) -> Any:
    """Print the operator log's tail; pytest shows it only for failed tests."""
    yield
    print(f"operator log: {operator.log_path}\n{operator.logs[-6000:]}")


def create_infra(api: client.ApiClient, namespace: str, name: str, region: str = "eu-west-1"):
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        INFRA,
        VERSION,
        namespace,
        "sampleclusters",
        {
            "apiVersion": f"{INFRA}/{VERSION}",
            "kind": "SampleCluster",
            "metadata": {"name": name},
            "spec": {"region": region, "bastion": {"instanceType": "t3.small"}},
        },
    )


def create_cluster(api: client.ApiClient, namespace: str, name: str, infra: str):
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        CAPI,
        VERSION,
        namespace,
        "clusters",
        {
            "apiVersion": f"{CAPI}/{VERSION}",
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {
                "infrastructureRef": {
                    "apiVersion": f"{INFRA}/{VERSION}",
                    "kind": "SampleCluster",
                    "name": infra,
                }
            },
        },
    )


def infra_of(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    return get_custom(api, INFRA, VERSION, "sampleclusters", namespace, name)


def cluster_of(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    return get_custom(api, CAPI, VERSION, "clusters", namespace, name)


def read(api: client.ApiClient, kind: str, namespace: str, name: str) -> Any | None:
    core = client.CoreV1Api(api)
    reader = core.read_namespaced_service if kind == "Service" else core.read_namespaced_config_map
    try:
        return reader(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def pieces(name: str) -> list[tuple[str, str]]:
    """The provider's objects for SampleCluster `name`, in creation order."""
    return [
        ("ConfigMap", f"{name}-network"),
        ("ConfigMap", f"{name}-bastion"),
        ("Service", f"{name}-apiserver-lb"),
    ]


def ready_condition(obj: dict[str, Any] | None) -> dict[str, Any]:
    return condition_of(obj, "Ready") or {}


def waiting_on_load_balancer(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return wait_for_condition(
        api,
        INFRA,
        VERSION,
        "sampleclusters",
        namespace,
        name,
        "Ready",
        "False",
        predicate=lambda o: condition_of(o, "Ready").get("message") == WAITING,
    )


def test_infrastructure_without_a_cluster_is_left_alone(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str, logs_on_failure
) -> None:
    create_infra(kube_api, kube_namespace, "lonely")
    obj = wait_for_condition(
        kube_api, INFRA, VERSION, "sampleclusters", kube_namespace, "lonely", "Successful"
    )
    # The runtime adds the finalizer before the first run, even while unowned.
    assert FINALIZER in obj["metadata"].get("finalizers", [])
    assert "ready" not in obj["status"]
    assert ready_condition(obj) == {}
    for kind, name in pieces("lonely"):
        assert read(kube_api, kind, kube_namespace, name) is None, f"{kind} {name} was made"


def test_cluster_adopts_infrastructure_and_gets_its_endpoint_once_ready(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str, logs_on_failure
) -> None:
    create_infra(kube_api, kube_namespace, "alpha-infra")
    cluster = create_cluster(kube_api, kube_namespace, "alpha", "alpha-infra")

    # Adoption: a controller ownerReference to the Cluster.
    def adopted() -> bool:
        obj = infra_of(kube_api, kube_namespace, "alpha-infra") or {}
        references = obj.get("metadata", {}).get("ownerReferences") or []
        return any(
            r["kind"] == "Cluster"
            and r["uid"] == cluster["metadata"]["uid"]
            and r.get("controller")
            for r in references
        )

    eventually(adopted, what="SampleCluster adopted by the Cluster")

    # The provider builds network, bastion and load balancer, then waits.
    infra = waiting_on_load_balancer(kube_api, kube_namespace, "alpha-infra")
    assert infra["status"]["ready"] is False
    network, bastion, lb = (read(kube_api, k, kube_namespace, n) for k, n in pieces("alpha-infra"))
    assert network.metadata.labels["topology.kubernetes.io/region"] == "eu-west-1"
    assert bastion.data["instanceType"] == "t3.small"
    assert lb.spec.type == "LoadBalancer"
    assert [p.port for p in lb.spec.ports] == [6443]
    for made in (network, bastion, lb):
        assert made.metadata.owner_references[0].kind == "SampleCluster"
    waiting = wait_for_condition(
        kube_api, CAPI, VERSION, "clusters", kube_namespace, "alpha", "InfrastructureReady", "False"
    )
    assert waiting["status"]["infrastructureReady"] is False

    # The "cloud" gives the load balancer an address.
    client.CoreV1Api(kube_api).patch_namespaced_service_status(
        "alpha-infra-apiserver-lb",
        kube_namespace,
        {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}},
    )
    endpoints = [{"host": "203.0.113.10", "port": 6443}]
    infra = wait_for_condition(
        kube_api, INFRA, VERSION, "sampleclusters", kube_namespace, "alpha-infra", "Ready"
    )
    assert infra["status"]["ready"] is True
    assert infra["status"]["apiEndpoints"] == endpoints

    ready = wait_for_condition(
        kube_api, CAPI, VERSION, "clusters", kube_namespace, "alpha", "InfrastructureReady"
    )
    assert ready["status"]["infrastructureReady"] is True
    assert ready["status"]["apiEndpoints"] == endpoints


def test_a_failing_step_is_reported_with_its_message_and_stops_the_rest(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str, logs_on_failure
) -> None:
    # A region that is no valid label value: the API server rejects the network.
    create_infra(kube_api, kube_namespace, "broken-infra", region="eu west 1")
    create_cluster(kube_api, kube_namespace, "broken", "broken-infra")
    obj = wait_for_condition(
        kube_api, INFRA, VERSION, "sampleclusters", kube_namespace, "broken-infra", "Failure"
    )
    message = condition_of(obj, "Failure")["message"]
    assert ") failed: failed to reconcile network: " in message, message  # after file:line
    assert "eu west 1" in message
    assert ready_condition(obj).get("reason") == "NetworkFailed"
    # In order: nothing after the failed step was made.
    for kind, name in pieces("broken-infra"):
        assert read(kube_api, kind, kube_namespace, name) is None, f"{kind} {name} was made"


def test_deleting_infrastructure_releases_its_objects_then_it_goes(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str, logs_on_failure
) -> None:
    create_infra(kube_api, kube_namespace, "gone-infra")
    create_cluster(kube_api, kube_namespace, "gone", "gone-infra")
    waiting_on_load_balancer(kube_api, kube_namespace, "gone-infra")
    assert all(read(kube_api, k, kube_namespace, n) for k, n in pieces("gone-infra"))

    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        INFRA, VERSION, kube_namespace, "sampleclusters", "gone-infra"
    )
    eventually(
        lambda: infra_of(kube_api, kube_namespace, "gone-infra") is None,
        what="SampleCluster deleted after its finalizer ran",
    )
    for kind, name in pieces("gone-infra"):
        assert read(kube_api, kind, kube_namespace, name) is None, f"{kind} {name} left behind"
