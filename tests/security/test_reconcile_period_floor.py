"""A custom object's author cannot make the operator run its object back to
back: a `reconcile-period` annotation of 0.001 is raised to the 1s floor, and
the object gets one Warning Event saying so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.metrics import gvk_label
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.reading import events_for
from ansible_operator.testing.waiting import wait_for_condition

pytestmark = pytest.mark.cluster

OPERATOR = Path(__file__).resolve().parent.parent / "operator"
GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"
WINDOW = 6.0  # seconds of runs counted


def test_a_tiny_reconcile_period_is_raised_to_the_floor(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    operator = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=[SERVE_METRICS],
        env={"WATCH_NAMESPACE": kube_namespace},
    ).start()
    try:
        client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            "greetings",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Greeting",
                "metadata": {
                    "name": "hasty",
                    "annotations": {"ansible.sdk.operatorframework.io/reconcile-period": "0.001"},
                },
                "spec": {},
            },
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "hasty", "Successful"
        )

        # The operator watches this namespace alone: its Greeting runs are hasty's.
        def runs() -> float:
            greeting = gvk_label(GROUP, VERSION, "Greeting")
            return operator.metric("ansible_operator_run_duration_seconds_count", GVK=greeting)

        before = runs()
        time.sleep(WINDOW)  # the window the runs are counted in
        during = runs() - before
    finally:
        operator.stop()
    # At most one run a second (and a run of its own takes a while); back to
    # back, a warm run of this role would finish several times a second.
    assert 1 <= during <= WINDOW + 1, f"{during} runs in {WINDOW}s"
    adjusted = [
        event
        for event in events_for(kube_api, kube_namespace, "hasty")
        if event.reason == "AnnotationAdjusted"
    ]
    assert len(adjusted) == 1, adjusted
    assert adjusted[0].type == "Warning" and "floor of 1s" in adjusted[0].message
