"""Two operator replicas with --leader-elect: one reconciles, the other takes
over when the first is killed."""

from __future__ import annotations

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
