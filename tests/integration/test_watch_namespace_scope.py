"""Many watched namespaces, and namespaces chosen by label, against the real API
server. What the operator ran is read from its own log and metrics: other
operators on the shared cluster may touch the same objects, never ours."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from greetings import GROUP, OPERATOR, VERSION, create, greeting, patch_spec, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.kube.informer import CLUSTER_WIDE_ABOVE
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

RECONCILED = "resource_created_at_seconds"


class Namespaces:
    """Namespaces this test made, deleted after it (our Greetings' finalizers
    removed first: no operator is left to run them)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.names: list[str] = []

    def make(self, name: str, **labels: str) -> str:
        metadata = client.V1ObjectMeta(name=name, labels=labels or None)
        self.core.create_namespace(client.V1Namespace(metadata=metadata))
        self.names.append(name)
        return name

    def label(self, name: str, **labels: str) -> None:
        self.core.patch_namespace(name, {"metadata": {"labels": labels}})

    def delete_all(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        for name in self.names:
            listed = custom.list_namespaced_custom_object(GROUP, VERSION, name, "greetings")
            for obj in listed["items"]:
                custom.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    name,
                    "greetings",
                    obj["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                )
            self.core.delete_namespace(name)


@pytest.fixture
def namespaces(kube_api: client.ApiClient) -> Iterator[Namespaces]:
    made = Namespaces(kube_api)
    yield made
    made.delete_all()


def runs(process: OperatorProcess) -> float:
    """Runs the operator finished, of every object."""
    return process.metric("ansible_operator_run_duration_seconds_count")


def test_a_long_watch_namespace_list_reconciles_every_object_and_no_other(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    namespaces: Namespaces,
    tmp_path: Path,
) -> None:
    run = uuid.uuid4().hex[:6]
    count = CLUSTER_WIDE_ABOVE + 5  # above the threshold: one watch across the cluster
    watched = [namespaces.make(f"scope-{run}-{n:02d}") for n in range(count)]
    unlisted = namespaces.make(f"scope-{run}-unlisted")
    for name in [*watched, unlisted]:
        create(kube_api, name, greeting("present"))  # before the operator starts
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "op.log",
        env={"WATCH_NAMESPACE": ",".join(watched)},
        args=[SERVE_METRICS],
    )
    try:
        process.start()
        assert process.health("/readyz") == 200
        for name in watched:
            wait_successful(kube_api, name, "present", timeout=240)
            assert process.metric(RECONCILED, namespace=name, name="present") > 0
        # No reconcile of its objects ever began (their series would be there).
        assert process.metric(RECONCILED, namespace=unlisted) == 0
    finally:
        process.stop()


def test_namespaces_chosen_by_label_are_followed_as_labels_change(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    namespaces: Namespaces,
    tmp_path: Path,
) -> None:
    run = uuid.uuid4().hex[:6]
    key = f"scope-test-{run}"
    leaving = namespaces.make(f"scope-{run}-leaving", **{key: "in"})
    joining = namespaces.make(f"scope-{run}-joining", **{key: "out"})
    create(kube_api, leaving, greeting("kept"))
    create(kube_api, joining, greeting("waiting"))
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "op.log",
        args=[SERVE_METRICS, f"--watch-namespace-selector={key}=in"],
    )
    try:
        process.start()
        wait_successful(kube_api, leaving, "kept")
        assert process.metric(RECONCILED, namespace=joining) == 0

        # Relabelled out: its objects are forgotten (their series go with them). A
        # change and even a deletion run nothing (our finalizer is not run: the
        # object is no longer ours).
        namespaces.label(leaving, **{key: "out"})
        eventually(
            lambda: process.metric(RECONCILED, namespace=leaving) == 0,
            what="the namespace that left forgotten",
        )
        before = runs(process)
        patch_spec(kube_api, leaving, "kept", {"greetingMessage": "changed"})
        client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
            GROUP, VERSION, leaving, "greetings", "kept"
        )

        # Relabelled in: its objects are listed and reconciled.
        namespaces.label(joining, **{key: "in"})
        wait_successful(kube_api, joining, "waiting")
        # The joining object's run is the only one since: the leaving one's events,
        # older, would have run first.
        assert runs(process) - before == 1
        assert process.metric(RECONCILED, namespace=leaving) == 0
        assert process.metric(RECONCILED, namespace=joining, name="waiting") > 0
    finally:
        process.stop()
