"""The test operator's `Stack` kind (tests/operator): making one, waiting for its
reconcile, reading the Deployment its role makes, and counting its runs."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from ansible_operator.testing.metrics import gvk_label, metric_value
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import wait_for_condition

GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"
RUNS = "ansible_operator_run_duration_seconds_count"  # one observation per finished run
IN_FLIGHT = "ansible_operator_runs_in_flight"


def stack(api: client.ApiClient, namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "stacks",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Stack",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


def reconciled(api: client.ApiClient, namespace: str, name: str, generation: int = 1):
    return wait_for_condition(
        api,
        GROUP,
        VERSION,
        "stacks",
        namespace,
        name,
        "Successful",
        predicate=lambda o: o["status"].get("observedGeneration") == generation,
    )


def deployment(api: client.ApiClient, namespace: str, name: str) -> client.V1Deployment | None:
    try:
        return client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def runs_started(operator: OperatorProcess) -> float:
    """The Stack runs the operator started, as its metrics count them: those it
    finished and those in flight (a run counts once it has begun, as a user
    watching the object sees it start; under load a run ends seconds after the
    write that shows it)."""
    gvk = gvk_label(GROUP, VERSION, "Stack")
    text = operator.exposition()  # both read from one scrape
    return metric_value(text, RUNS, GVK=gvk) + metric_value(text, IN_FLIGHT, GVK=gvk)


def settled_runs(operator: OperatorProcess) -> float | None:
    """The runs started, once their count has not changed for 2 s."""
    before = runs_started(operator)
    time.sleep(2)  # a window: no count is "settled" by any event
    return before if runs_started(operator) == before else None
