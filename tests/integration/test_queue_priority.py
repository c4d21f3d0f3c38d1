"""An object edited while a start's backlog waits is reconciled before the
backlog: the operator starts over objects that are there already (its list
queues them all), and an edit goes ahead of them (controller/priorities.py).
Runs are ordered by holds the role waits on, with one worker: no timing."""

from __future__ import annotations

from pathlib import Path

import pytest
from greetings import KINDS, OPERATOR, create, greeting, patch_spec
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.metrics import gvk_label
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import condition_of, eventually
from holds import Hold

pytestmark = pytest.mark.cluster

GREETING = gvk_label("test.ansible-operator.io", "v1alpha1", "Greeting")
BACKLOG = [f"b{number:02}" for number in range(10)]  # listed before "target"


def successful_for(obj: dict | None, generation: int) -> bool:
    status = (obj or {}).get("status") or {}
    entry = condition_of(obj, "Successful") or {}
    return entry.get("status") == "True" and status.get("observedGeneration") == generation


def test_an_object_edited_during_a_start_runs_before_the_listed_backlog(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    holds = {}
    for name in BACKLOG:  # every backlog run waits at its hold until the test lets it go
        (tmp_path / name).mkdir()
        holds[name] = Hold(tmp_path / name)
        create(kube_api, kube_namespace, greeting(name, hold=str(holds[name].path)))
    create(kube_api, kube_namespace, greeting("target"))
    operator = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=["--max-concurrent-reconciles=1", SERVE_METRICS],
        env={"WATCH_NAMESPACE": kube_namespace},
    )
    try:
        operator.start()
        # The list queued all eleven; the one worker took the first and holds there.
        holds["b00"].wait_reached(timeout=120)
        assert operator.metric("ansible_operator_queue_depth_by_source", source="list") == 10
        patch_spec(kube_api, kube_namespace, "target", {"greetingMessage": "edited"})
        eventually(
            lambda: operator.metric("ansible_operator_queue_depth_by_source", source="change") == 1,
            timeout=60,
            what="the edit queued as a change",
        )
        holds["b00"].release()
        KINDS.wait_for_condition(
            kube_api,
            kube_namespace,
            "Greeting",
            "target",
            "Successful",
            timeout=120,
            predicate=lambda obj: successful_for(obj, 2),
        )
        # The edit ran next; the backlog still waits behind b01, whose run holds the worker.
        for name in BACKLOG[2:]:
            assert not holds[name].reached_marker.exists(), name
            assert not successful_for(KINDS.get(kube_api, kube_namespace, "Greeting", name), 1)
        waited = "ansible_operator_queue_duration_seconds_count"
        assert operator.metric(waited, GVK=GREETING, source="change") == 1
        assert operator.metric(waited, GVK=GREETING, source="list") <= 2  # b00, maybe b01
    finally:
        for hold in holds.values():
            hold.release()
        operator.stop()
