"""`ansible-operator run` over the test operator (tests/operator), against a real
API server with real ansible-runner and ansible-core."""

from __future__ import annotations

import base64
import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from greetings import GROUP, OPERATOR, VERSION, create, greeting, patch_spec, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.reading import config_map, events_for
from ansible_operator.testing.waiting import (
    condition_of,
    eventually,
    get_custom,
    wait_for_condition,
)

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def operator(
    kube_cluster: Cluster, test_crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    logs = tmp_path_factory.mktemp("operator") / "operator.log"
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=logs,
        args=["--max-concurrent-reconciles=2", SERVE_METRICS],
    ).start()
    yield process
    process.stop()


def test_created_object_reaches_successful_with_ansible_result(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(
        kube_api,
        kube_namespace,
        greeting("hello", greetingMessage="hi", nestedSettings={"innerValue": "deep"}),
    )
    obj = wait_successful(kube_api, kube_namespace, "hello")

    status = obj["status"]
    assert status["observedGeneration"] == 1
    assert status["greeted"] == "hi"  # the role's own status key survives our writes
    running = condition_of(obj, "Running")
    assert running["status"] == "False" and running["reason"] == "Successful"
    result = condition_of(obj, "Successful")["ansibleResult"]
    assert result["failures"] == 0 and result["ok"] >= 2 and result["changed"] >= 1
    # snake_case vars, the raw spec and watch vars all reached the role
    data = config_map(kube_api, kube_namespace, "hello-greeting")
    assert data["message"] == "hi!"
    assert data["nested"] == "deep"
    assert data["raw_keys"] == "greetingMessage,nestedSettings"
    assert data["uid"] == obj["metadata"]["uid"]
    assert "test.ansible-operator.io/cleanup" in obj["metadata"]["finalizers"]
    # And the log line a user reads (logged as the run ended, before the status write).
    assert f"run succeeded kind=Greeting namespace={kube_namespace} name=hello" in operator.logs


def test_spec_update_runs_again_and_updates_the_dependent(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, greeting("change", greetingMessage="one"))
    wait_successful(kube_api, kube_namespace, "change")
    patch_spec(kube_api, kube_namespace, "change", {"greetingMessage": "two"})
    wait_successful(
        kube_api,
        kube_namespace,
        "change",
        predicate=lambda o: o["status"].get("observedGeneration") == 2,
    )
    assert config_map(kube_api, kube_namespace, "change-greeting")["message"] == "two!"


def test_failing_task_sets_failure_with_its_message_and_an_event_then_retries(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, greeting("sad", failWith="the database is on fire"))
    obj = wait_for_condition(
        kube_api, GROUP, VERSION, "greetings", kube_namespace, "sad", "Failure"
    )
    failure = condition_of(obj, "Failure")
    assert failure["message"].endswith(") failed: the database is on fire")  # after file:line
    assert failure["ansibleResult"]["failures"] == 1
    assert condition_of(obj, "Successful")["status"] == "False"
    assert condition_of(obj, "Running")["status"] == "False"
    eventually(
        lambda: [
            e
            for e in events_for(kube_api, kube_namespace, "sad")
            if e.type == "Warning" and "on fire" in e.message
        ],
        what="a Warning event with the failure message",
    )
    # Retried with backoff, a second failed run without any change to the
    # object: the user sees it as the Warning Event counted again.
    eventually(
        lambda: [
            e
            for e in events_for(kube_api, kube_namespace, "sad")
            if e.type == "Warning" and "on fire" in e.message and (e.count or 0) >= 2
        ],
        timeout=60,
        what="a retried run: the Warning Event counted twice",
    )

    patch_spec(kube_api, kube_namespace, "sad", {"failWith": None})
    wait_successful(kube_api, kube_namespace, "sad")
    eventually(
        lambda: [
            e
            for e in events_for(kube_api, kube_namespace, "sad")
            if e.type == "Normal" and e.reason == "ReconcileSucceeded"
        ],
        what="a Normal event for the first success after failures",
    )


def test_rescued_failure_is_successful(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, greeting("rescued", rescueMe=True))
    obj = wait_successful(kube_api, kube_namespace, "rescued")
    assert condition_of(obj, "Failure")["status"] == "False"
    assert condition_of(obj, "Successful")["ansibleResult"]["failures"] == 0


def test_syntax_error_is_a_failure_with_the_reason_not_a_stuck_running(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(
        kube_api,
        kube_namespace,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Broken",
            "metadata": {"name": "broken"},
            "spec": {},
        },
    )
    obj = wait_for_condition(
        kube_api, GROUP, VERSION, "brokens", kube_namespace, "broken", "Failure"
    )
    message = condition_of(obj, "Failure")["message"]
    assert "without reporting results" in message
    assert "broken.yml" in message or "yntax" in message or "ERROR" in message
    assert condition_of(obj, "Running")["status"] == "False"


def test_finalizer_role_runs_on_delete_and_the_object_goes_away(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, greeting("bye", greetingMessage="x"))
    wait_successful(kube_api, kube_namespace, "bye")
    assert config_map(kube_api, kube_namespace, "bye-greeting") is not None
    # Not owned by the Greeting (what the run creates is, and goes with it):
    # the finalizer run fills it in, and it outlives the Greeting.
    client.CoreV1Api(kube_api).create_namespaced_config_map(
        kube_namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="bye-finalized"))
    )
    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "greetings", "bye"
    )
    eventually(
        lambda: get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "bye") is None,
        what="object deleted after its finalizer",
    )
    assert config_map(kube_api, kube_namespace, "bye-finalized") == {"finalized": "yes"}
    assert config_map(kube_api, kube_namespace, "bye-greeting") is None


@pytest.mark.parametrize("how", ["replace", "apply"])
def test_objects_made_by_hand_are_never_adopted_by_normal_or_finalizer_runs(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str, how: str
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map(
        kube_namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="handmade"), data={"by": "person"}),
    )
    create(
        kube_api, kube_namespace, greeting("adopter", touchForeign={"name": "handmade", "how": how})
    )
    wait_successful(kube_api, kube_namespace, "adopter")
    handmade = core.read_namespaced_config_map("handmade", kube_namespace)
    assert handmade.data["touched_by"] == "adopter" and handmade.data["run"] == "reconcile"
    assert not handmade.metadata.owner_references

    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "greetings", "adopter"
    )
    eventually(
        lambda: (
            get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "adopter") is None
        ),
        what="object deleted after its finalizer",
    )
    # What the finalizer run created is the Greeting's, and the garbage
    # collector takes it; the ConfigMap the person made stays, unowned.
    eventually(
        lambda: config_map(kube_api, kube_namespace, "adopter-finalized") is None,
        what="the finalizer run's own ConfigMap collected with its owner",
    )
    handmade = core.read_namespaced_config_map("handmade", kube_namespace)
    assert handmade.data["run"] == "finalizer"
    assert not handmade.metadata.owner_references
    assert re.search(
        rf"write left object unowned kind=ConfigMap namespace={kube_namespace} name=handmade",
        operator.logs,
    )


def test_failing_finalizer_keeps_the_object_with_a_failure(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, greeting("stuck", failFinalizerWith="cannot release"))
    wait_successful(kube_api, kube_namespace, "stuck")
    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "greetings", "stuck"
    )
    obj = wait_for_condition(
        kube_api, GROUP, VERSION, "greetings", kube_namespace, "stuck", "Failure"
    )
    assert condition_of(obj, "Failure")["message"].endswith(") failed: cannot release")
    assert obj["metadata"]["deletionTimestamp"]
    assert obj["metadata"]["finalizers"] == ["test.ansible-operator.io/cleanup"]

    patch_spec(kube_api, kube_namespace, "stuck", {"failFinalizerWith": None})
    eventually(
        lambda: get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "stuck") is None,
        timeout=90,
        what="object deleted once its finalizer succeeds",
    )


def test_requeue_after_runs_again_and_status_is_still_written(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, greeting("soon", requeueAfter="2s", greetingMessage="r"))
    obj = wait_successful(kube_api, kube_namespace, "soon")
    assert obj["status"]["observedGeneration"] == 1
    # Each run writes its completion time (to the second) into the status:
    # three of them seen are three runs, 2s apart.
    completions: set[str] = set()

    def three_runs_seen() -> bool:
        now = get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "soon")
        result = (condition_of(now, "Successful") or {}).get("ansibleResult") or {}
        if result.get("completion"):
            completions.add(result["completion"])
        return len(completions) >= 3

    eventually(
        three_runs_seen,
        timeout=40,
        describe=lambda: f"completions seen: {sorted(completions)}",
        what="runs repeated by requeue_after (reconcilePeriod is 1h)",
    )


def test_secret_watch_without_generation_retriggers_on_data_change_and_selector_filters(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_secret(
        kube_namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="watched", labels={"app": "mirror-me"}),
            data={"a": base64.b64encode(b"1").decode()},
        ),
    )
    core.create_namespaced_secret(
        kube_namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="ignored"), data={"a": "MQ=="}),
    )
    eventually(
        lambda: (config_map(kube_api, kube_namespace, "watched-mirror") or {}).get("keys") == "a",
        what="mirror of the labelled Secret",
    )
    core.patch_namespaced_secret(
        "watched", kube_namespace, {"data": {"b": base64.b64encode(b"2").decode()}}
    )
    eventually(
        lambda: (config_map(kube_api, kube_namespace, "watched-mirror") or {}).get("keys") == "a,b",
        what="mirror updated after the Secret's data changed",
    )
    assert config_map(kube_api, kube_namespace, "ignored-mirror") is None
    # Which Secrets the operator reconciled, as its metrics list them.
    reconciled = functools.partial(
        operator.metric, "resource_created_at_seconds", namespace=kube_namespace, kind="Secret"
    )
    assert reconciled(name="watched") > 0
    assert reconciled(name="ignored") == 0


def test_watches_file_with_unknown_key_fails_at_start_with_file_and_line(tmp_path: Path) -> None:
    watches = tmp_path / "watches.yaml"
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("[]\n")
    watches.write_text(
        "- version: v1\n  group: x.example.com\n  kind: X\n  role: r\n  reconcilePerid: 5m\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "ansible_operator.cli", "run", f"--watches-file={watches}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert f"{watches}:5: unknown key 'reconcilePerid' (did you mean 'reconcilePeriod'?)" in (
        result.stderr
    )
