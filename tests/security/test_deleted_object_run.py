"""Deleting an object stops its run in flight: the run's processes (those that
left its session too) are killed, the operator says so, and nothing is
written about the object. Both when the object goes at once and when another
controller's finalizer holds it (deletion started, no finalizer of ours).
In both runner modes."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from attack_operator import (
    GROUP,
    PLURALS,
    RUNNER_MODES,
    VERSION,
    delete,
    get,
    sleeping,
    start,
    unique_sleep,
    wait_gone,
)
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster
SOMEONE_ELSES = "tests.ansible-operator.io/keep"


@pytest.fixture(scope="module", params=RUNNER_MODES)
def operator(
    request: pytest.FixtureRequest,
    kube_cluster: Cluster,
    attack_crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    scratch = tmp_path_factory.mktemp(f"deleted-{request.param}")
    process = start(
        kube_cluster,
        scratch / "operator.log",
        mode=request.param,
        args=["--graceful-shutdown-timeout=1s", SERVE_METRICS],
    )
    yield process
    process.stop()


def cancelled(operator: OperatorProcess) -> float:
    """Reconciles whose run was stopped, as the operator counts them."""
    return operator.metric("ansible_operator_reconcile_result_total", result="cancelled")


def create_holding(
    api: client.ApiClient, namespace: str, name: str, *, finalizers: list[str] | None = None
) -> tuple[str, str]:
    """An Escape whose run leaves a process behind and holds; their `sleep` durations."""
    marker, hold = unique_sleep(), unique_sleep()
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Escape",
        "metadata": {"name": name, "finalizers": finalizers or []},
        "spec": {"marker": marker, "hold": hold},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURALS["Escape"], body
    )
    eventually(lambda: sleeping(hold), what=f"the run's `sleep {hold}` running")
    eventually(lambda: sleeping(marker), what=f"the role's `sleep {marker}` running")
    return marker, hold


def test_deleting_an_object_kills_its_run_in_flight(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    before = cancelled(operator)
    marker, hold = create_holding(kube_api, kube_namespace, "doomed")
    delete(kube_api, kube_namespace, "Escape", "doomed")
    wait_gone(hold, timeout=60)
    wait_gone(marker, timeout=60)
    eventually(lambda: cancelled(operator) > before, what="the run counted as cancelled")
    assert re.search(  # what the operator's user reads of it
        rf"run cancelled kind=Escape namespace={kube_namespace} name=doomed run=\S+ "
        r"reason='the object was deleted'",
        operator.logs,
    )


def test_a_deletion_held_by_another_finalizer_kills_the_run_and_writes_nothing(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    before = cancelled(operator)
    marker, hold = create_holding(kube_api, kube_namespace, "held", finalizers=[SOMEONE_ELSES])
    delete(kube_api, kube_namespace, "Escape", "held")
    wait_gone(hold, timeout=60)
    wait_gone(marker, timeout=60)
    eventually(lambda: cancelled(operator) > before, what="the run counted as cancelled")
    assert re.search(
        rf"run cancelled kind=Escape namespace={kube_namespace} name=held run=\S+ "
        r"reason='the object is being deleted and has no finalizer of this operator to run'",
        operator.logs,
    )
    remaining = get(kube_api, kube_namespace, "Escape", "held")
    assert remaining is not None and remaining["metadata"].get("deletionTimestamp")
    # The Running condition of the run was the last word: no Failure, no "Interrupted".
    conditions = {c["type"]: c for c in (remaining.get("status") or {}).get("conditions") or []}
    assert conditions["Running"]["status"] == "True"
    assert "Failure" not in conditions or conditions["Failure"]["status"] == "False"
