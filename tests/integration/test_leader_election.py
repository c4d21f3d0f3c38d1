"""Two operator replicas with --leader-elect: one reconciles, the other takes
over when the first is killed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.metrics import gvk_label
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually, wait_for_condition

pytestmark = pytest.mark.cluster

OPERATOR = Path(__file__).resolve().parent.parent / "operator"
GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"
GREETING = gvk_label(GROUP, VERSION, "Greeting")
RUNS = "ansible_operator_run_duration_seconds_count"
RESULTS = "ansible_operator_reconcile_result_total"
CACHED = "ansible_operator_cache_objects"
GREETINGS_INFORMER = f"{GROUP}/{VERSION}/greetings"
QUEUED = "ansible_operator_queue_depth"
WARM_PID = "ansible_operator_warm_runner_pid"


def test_only_the_leader_reconciles_and_the_other_takes_over_when_it_dies(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    args = [
        "--leader-elect",
        f"--leader-election-namespace={kube_namespace}",
        "--leader-election-id=test-operator",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        SERVE_METRICS,
    ]
    env = {"WATCH_NAMESPACE": kube_namespace}
    first = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "first.log",
        args=args,
        env=env,
    ).start()
    second = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "second.log",
        args=args,
        env=env,
    )
    try:
        first.wait_leading()
        second.start()  # ready: it stands by
        assert second.metric("leader_election_master_status") == 0
        custom = client.CustomObjectsApi(kube_api)
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            "greetings",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Greeting",
                "metadata": {"name": "one"},
                "spec": {},
            },
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "one", "Successful"
        )
        leases = client.CoordinationV1Api(kube_api)
        assert first.metric(RUNS, GVK=GREETING) >= 1
        assert second.metric(RUNS, GVK=GREETING) == 0  # the standby ran nothing
        holder = leases.read_namespaced_lease("test-operator", kube_namespace).spec.holder_identity
        assert holder == first.lease_identity()

        first.kill()
        eventually(
            lambda: (
                leases.read_namespaced_lease("test-operator", kube_namespace).spec.holder_identity
                == second.lease_identity()
            ),
            timeout=30,
            what="the standby holding the Lease",
        )
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            "greetings",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Greeting",
                "metadata": {"name": "two"},
                "spec": {},
            },
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "two", "Successful"
        )
        assert second.metric(RESULTS, GVK=GREETING, result="succeeded") >= 1
        lease = leases.read_namespaced_lease("test-operator", kube_namespace)
        assert lease.spec.lease_transitions >= 1
        # The killed first has no metrics left to read: its log is its record.
        eventually(lambda: "name=two" not in first.logs, timeout=1)
    finally:
        first.stop()
        second.stop()


def _greeting(name: str) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Greeting",
        "metadata": {"name": name},
        "spec": {},
    }


def _replicas(
    kube_cluster: Cluster, kube_namespace: str, tmp_path: Path, lease: str
) -> Callable[[str], OperatorProcess]:
    """Replicas electing a leader on `lease`, named by their log."""
    args = [
        "--leader-elect",
        f"--leader-election-namespace={kube_namespace}",
        f"--leader-election-id={lease}",
        # Long: a takeover seen well within it came from a release, not an expiry.
        "--leader-elect-lease-duration=120s",
        "--leader-elect-renew-deadline=100s",
        "--leader-elect-retry-period=2s",
        SERVE_METRICS,
    ]

    def replica(name: str) -> OperatorProcess:
        return OperatorProcess(
            OPERATOR / "watches.yaml",
            kube_cluster.kubeconfig,
            log_path=tmp_path / f"{name}.log",
            args=args,
            env={"WATCH_NAMESPACE": kube_namespace},
        )

    return replica


def test_a_leader_stopped_cleanly_releases_its_lease(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    replica = _replicas(kube_cluster, kube_namespace, tmp_path, "released")
    leader = replica("leader").start()
    try:
        leader.wait_leading()
        leases = client.CoordinationV1Api(kube_api)
        lease = leases.read_namespaced_lease("released", kube_namespace)
        assert lease.spec.holder_identity == leader.lease_identity()
        assert leader.stop() == 0  # SIGTERM
        lease = leases.read_namespaced_lease("released", kube_namespace)
        assert not lease.spec.holder_identity  # handed back: anyone may take it now
    finally:
        leader.stop()


def test_a_standby_is_warm_before_it_leads_and_takes_over_when_the_leader_stops(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    replica = _replicas(kube_cluster, kube_namespace, tmp_path, "warm-standby")
    custom = client.CustomObjectsApi(kube_api)
    leases = client.CoordinationV1Api(kube_api)
    leader = replica("leader").start()
    standby = replica("standby")
    try:
        leader.wait_leading()
        custom.create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, "greetings", _greeting("one")
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "one", "Successful"
        )
        standby.start()  # ready: its caches are synced
        # Warm while standing by: the object in its cache and queue, its warm runner up.
        assert standby.metric("leader_election_master_status") == 0
        assert standby.metric(CACHED, informer=GREETINGS_INFORMER) == 1
        assert standby.metric(QUEUED, GVK=GREETING) == 1  # to run once it leads
        eventually(
            lambda: standby.metric(WARM_PID) > 0,
            timeout=120,
            what="the standby's warm runner started",
        )
        assert standby.metric("leader_election_master_status") == 0
        assert standby.metric(RUNS, GVK=GREETING) == 0  # nothing run while standing by

        assert leader.stop() == 0  # SIGTERM: the Lease is released, not left to expire
        eventually(
            lambda: (
                leases.read_namespaced_lease("warm-standby", kube_namespace).spec.holder_identity
                == standby.lease_identity()
            ),
            timeout=60,  # half the lease: only a release lets it in this soon
            what="the standby holding the Lease",
        )
        standby.wait_leading()
        # What it had queued while standing by runs now, and new objects too.
        eventually(
            lambda: standby.metric(RUNS, GVK=GREETING) >= 1,
            timeout=120,
            what="the standby's first run",
        )
        custom.create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, "greetings", _greeting("two")
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "two", "Successful"
        )
    finally:
        leader.stop()
        standby.stop()
