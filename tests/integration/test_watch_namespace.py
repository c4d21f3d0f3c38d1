"""WATCH_NAMESPACE limits the operator to the namespaces it names. A module of
its own: no other operator may be running while it checks what was left alone."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from greetings import GROUP, OPERATOR, VERSION, create, greeting, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import get_custom

pytestmark = pytest.mark.cluster


def test_watch_namespace_limits_what_is_reconciled(
    kube_cluster: Cluster, test_crds: None, kube_api: client.ApiClient, tmp_path: Path
) -> None:
    core = client.CoreV1Api(kube_api)
    watched, other = (f"ns-{role}-{uuid.uuid4().hex[:6]}" for role in ("watched", "other"))
    for name in (watched, other):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "op.log",
        env={"WATCH_NAMESPACE": watched},
        # The rest of the suite runs the default (warm) runner mode; this
        # operator keeps the reference mode proven too.
        args=["--runner-mode=reference", SERVE_METRICS],
    )
    try:
        # Created before the operator starts; no other operator runs during
        # this module, so only this one could have reconciled it.
        create(kube_api, other, greeting("elsewhere"))
        process.start()
        create(kube_api, watched, greeting("here"))
        wait_successful(kube_api, watched, "here")
        obj = get_custom(kube_api, GROUP, VERSION, "greetings", other, "elsewhere")
        assert obj is not None and "status" not in obj
        # What the operator reconciled, as its metrics list it: one series per object.
        reconciled = "resource_created_at_seconds"
        assert process.metric(reconciled, namespace=watched, name="here") > 0
        assert process.metric(reconciled, namespace=other) == 0
    finally:
        process.stop()
        for name in (watched, other):
            core.delete_namespace(name)
