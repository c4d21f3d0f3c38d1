"""The sample operators deployed as users deploy them: the image built from
this repository's Dockerfiles, `config/` applied as it is, the operator
running as Pods with its ServiceAccount, and the Pods its roles create running
for real on the node."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from nodeops import NodeCluster, SessionNode, pod_logs, ready_lease_holder, wait_for

from ansible_operator.testing.manifests import apply_manifests, documents

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
SYSTEM = "ansible-operator-system"
MEMCACHED_SAMPLE = CONFIG / "samples" / "cache_v1alpha1_memcached.yaml"
LEASE = "ansible-operator-samples"  # --leader-election-id in config/manager/manager.yaml


@pytest.fixture(scope="module")
def deployed_operator(session_node: SessionNode) -> Iterator[NodeCluster]:
    node_cluster = session_node.get()
    images = node_cluster.images
    node_cluster.node.load([images.samples(), images.memcached()])
    api = node_cluster.api
    for crd in sorted((CONFIG / "crd" / "bases").glob("*.yaml")):
        apply_manifests(api, crd)
    # The namespace, then what its Pods need (ServiceAccount, RBAC), then the rest.
    manager = documents(CONFIG / "manager" / "manager.yaml")
    namespaces = [doc for doc in manager if doc["kind"] == "Namespace"]
    rest = [doc for doc in manager if doc["kind"] != "Namespace"]
    for docs in (namespaces, *(documents(f) for f in sorted((CONFIG / "rbac").glob("*.yaml"))),
                 rest):  # fmt: skip
        apply_manifests(api, _yaml(docs))
    yield node_cluster
    client.CoreV1Api(api).delete_namespace(SYSTEM, grace_period_seconds=0)


def _yaml(docs: list[dict[str, object]]) -> str:
    return yaml.safe_dump_all(docs)


def operator_log(cluster: NodeCluster) -> str:
    return pod_logs(cluster, SYSTEM, tail_lines=30)


def memcached_available(cluster: NodeCluster, namespace: str) -> bool:
    memcached = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "cache.example.com", "v1alpha1", namespace, "memcacheds", "memcached-sample"
    )
    conditions = memcached.get("status", {}).get("conditions", [])
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def leader_pod(cluster: NodeCluster) -> client.V1Pod | None:
    """The operator Pod holding the leader Lease, once it is Ready."""
    return ready_lease_holder(cluster, LEASE, SYSTEM)


def readyz(pod: client.V1Pod) -> int:
    """The Pod's /readyz status code; 0 while nothing listens there yet."""
    if not pod.status.pod_ip:
        return 0
    url = f"http://{pod.status.pod_ip}:6789/readyz"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except urllib.error.URLError:
        return 0


def test_operator_runs_as_pods_and_one_replica_leads(deployed_operator: NodeCluster) -> None:
    leader = wait_for(lambda: leader_pod(deployed_operator), "a Ready leader", timeout=180)
    pods = deployed_operator.core.list_namespaced_pod(SYSTEM).items
    assert len(pods) == 2, operator_log(deployed_operator)
    assert {pod.status.phase for pod in pods} == {"Running"}
    assert leader.spec.service_account_name == "ansible-operator"


def test_standby_replica_is_ready_as_in_controller_runtime(
    deployed_operator: NodeCluster,
) -> None:
    leader = wait_for(lambda: leader_pod(deployed_operator), "a Ready leader", timeout=180)
    standby = [
        pod
        for pod in deployed_operator.core.list_namespaced_pod(SYSTEM).items
        if pod.metadata.name != leader.metadata.name
    ]
    assert len(standby) == 1
    # Both replicas start together; the standby's probe server may answer a
    # moment after the leader is Ready.
    name = standby[0].metadata.name
    wait_for(
        lambda: readyz(deployed_operator.core.read_namespaced_pod(name, SYSTEM)) == 200,
        f"the standby {name} to answer /readyz with 200",
        timeout=60,
    )


def memcached_version(address: str) -> str | None:
    """memcached's answer to `version` on its port, or None while it cannot be
    reached (not listening yet, the Pod's network being set up)."""
    try:
        with socket.create_connection((address, 11211), timeout=5) as connection:
            connection.sendall(b"version\r\n")
            return connection.recv(100).decode(errors="replace")
    except OSError:
        return None


def test_memcached_pods_run_and_accept_connections(deployed_operator: NodeCluster) -> None:
    wait_for(lambda: leader_pod(deployed_operator), "a Ready leader", timeout=180)
    namespace = "memcached-e2e"
    deployed_operator.core.create_namespace({"metadata": {"name": namespace}})
    apply_manifests(deployed_operator.api, MEMCACHED_SAMPLE, namespace)

    wait_for(
        lambda: memcached_available(deployed_operator, namespace),
        "the Memcached to report Available",
        timeout=180,
    )
    pods = deployed_operator.core.list_namespaced_pod(
        namespace, label_selector="app.kubernetes.io/instance=memcached-sample"
    ).items
    assert len(pods) == 2
    assert {pod.status.phase for pod in pods} == {"Running"}
    # The sample's Deployment has no readiness probe: Available (its Pods'
    # containers started) can come a moment before memcached listens.
    for pod in pods:
        answer = wait_for(
            lambda pod=pod: memcached_version(pod.status.pod_ip),
            f"memcached in {pod.metadata.name} to answer on {pod.status.pod_ip}:11211",
            timeout=60,
        )
        assert str(answer).startswith("VERSION 1.6"), (pod.metadata.name, answer)


def test_operator_killed_mid_run_is_restarted_and_every_object_converges(
    deployed_operator: NodeCluster,
) -> None:
    leader = wait_for(lambda: leader_pod(deployed_operator), "a Ready leader", timeout=180)
    namespace = "crash-e2e"
    deployed_operator.core.create_namespace({"metadata": {"name": namespace}})
    names = [f"crash-{i}" for i in range(3)]
    sample = documents(MEMCACHED_SAMPLE)[0]
    for name in names:
        apply_manifests(
            deployed_operator.api,
            yaml.safe_dump({**sample, "metadata": {"name": name}, "spec": {"size": 1}}),
            namespace,
        )
    # SIGKILL, as the OOM killer would: no graceful shutdown, runs cut short.
    container = leader.status.container_statuses[0].container_id.split("://")[1]
    deployed_operator.node.ctr("tasks", "kill", "--signal", "SIGKILL", container)

    def restarted() -> bool:
        pod = deployed_operator.core.read_namespaced_pod(leader.metadata.name, SYSTEM)
        return pod.status.container_statuses[0].restart_count >= 1

    wait_for(restarted, "the killed operator container to be restarted", timeout=120)

    def converged(name: str) -> bool:
        memcached = client.CustomObjectsApi(deployed_operator.api).get_namespaced_custom_object(
            "cache.example.com", "v1alpha1", namespace, "memcacheds", name
        )
        listed = memcached.get("status", {}).get("conditions", [])
        conditions = {c["type"]: c["status"] for c in listed}
        return (
            conditions.get("Successful") == "True"
            and conditions.get("Available") == "True"
            and conditions.get("Running") != "True"
        )

    for name in names:
        wait_for(lambda name=name: converged(name), f"{name} to converge", timeout=180)


def test_deleting_the_leader_pod_hands_over_with_nothing_lost(
    deployed_operator: NodeCluster,
) -> None:
    first = wait_for(lambda: leader_pod(deployed_operator), "a Ready leader", timeout=180)
    namespace = "handover-e2e"
    deployed_operator.core.create_namespace({"metadata": {"name": namespace}})
    # Created while the leader shuts down: the next leader must reconcile it.
    deployed_operator.core.delete_namespaced_pod(first.metadata.name, SYSTEM)
    apply_manifests(deployed_operator.api, MEMCACHED_SAMPLE, namespace)

    def next_leader() -> client.V1Pod | None:
        pod = leader_pod(deployed_operator)
        return pod if pod and pod.metadata.name != first.metadata.name else None

    wait_for(next_leader, "another replica to lead", timeout=120)
    wait_for(
        lambda: memcached_available(deployed_operator, namespace),
        "the Memcached created during the handover to report Available",
        timeout=180,
    )
