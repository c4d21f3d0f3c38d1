"""A run's own writes to its dependents run its owner no second time; their
status-only changes neither. Run counts are read from the operator's metrics, so
no other operator may reconcile these objects: a module of its own, as the
module-scoped operators of other files (every namespace) are stopped by then
(test operator kind `Stack`, real kubernetes.core)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from stacks import GROUP, VERSION, deployment, reconciled, runs_started, settled_runs, stack

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

OPERATOR = Path(__file__).resolve().parent.parent / "operator"


@pytest.fixture
def counted_operator(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator over the test's namespace alone, serving metrics: its
    run count is this test's runs, whatever else the cluster holds."""
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=[SERVE_METRICS],
        env={"WATCH_NAMESPACE": kube_namespace},
    ).start()
    yield process
    process.stop()


def test_status_only_changes_of_a_dependent_do_not_rerun_the_owner(
    counted_operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    stack(kube_api, kube_namespace, "quiet")
    reconciled(kube_api, kube_namespace, "quiet")
    apps = client.AppsV1Api(kube_api)
    # The dependent watch is live: a spec edit is corrected.
    apps.patch_namespaced_deployment("quiet", kube_namespace, {"spec": {"replicas": 3}})
    eventually(
        lambda: deployment(kube_api, kube_namespace, "quiet").spec.replicas == 1,
        what="spec drift corrected",
    )
    settled = eventually(lambda: settled_runs(counted_operator), what="runs settled")
    assert settled >= 2  # the first run and the drift's: the count is read
    apps.patch_namespaced_deployment_status(
        "quiet", kube_namespace, {"status": {"observedGeneration": 5, "replicas": 1}}
    )
    time.sleep(3)  # the window a rerun would have started in
    assert runs_started(counted_operator) == settled


def test_a_change_runs_its_owner_once_though_the_run_rewrites_its_dependent(
    counted_operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    stack(kube_api, kube_namespace, "once", size=1)
    reconciled(kube_api, kube_namespace, "once")
    settled = eventually(lambda: settled_runs(counted_operator), what="runs settled")

    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "stacks", "once", {"spec": {"size": 3}}
    )
    reconciled(kube_api, kube_namespace, "once", generation=2)
    assert deployment(kube_api, kube_namespace, "once").spec.replicas == 3
    # The run's own patch of the Deployment changes it; its change event is
    # no reason to run the owner a second time.
    runs = eventually(lambda: settled_runs(counted_operator), what="runs settled")
    assert runs == settled + 1
