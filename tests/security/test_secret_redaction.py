"""Values a run read from Secrets or gave to no_log tasks never leave it: not
in the Failure condition, not in Events, not in the operator's log (with
`--ansible-log-events=everything` and `ANSIBLE_DEBUG_LOGS=true`), not in
the artifacts kept on disk, whose files are private. In both runner modes."""

from __future__ import annotations

import base64
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_operator import (
    RUNNER_MODES,
    condition,
    create,
    files_under,
    object_dir,
    start_logging_everything,
    warning_messages,
)
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess

pytestmark = pytest.mark.cluster
REDACTED = "<redacted>"


@pytest.fixture(scope="module", params=RUNNER_MODES)
def operator(
    request: pytest.FixtureRequest,
    kube_cluster: Cluster,
    attack_crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[OperatorProcess, Path]]:
    scratch = tmp_path_factory.mktemp(f"redaction-{request.param}")
    process, runs = start_logging_everything(kube_cluster, scratch, mode=request.param)
    yield process, runs
    process.stop()


def forms(value: str) -> list[str]:
    return [value, base64.b64encode(value.encode()).decode()]


def assert_artifacts_clean(directory: Path, secrets: list[str]) -> None:
    files = list(files_under(directory))
    assert files, f"no artifacts kept in {directory}"
    for path in files:
        text = path.read_text(errors="replace")
        for secret in secrets:
            assert secret not in text, f"{path} keeps {secret!r}"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path} is not private"


def test_a_secret_value_echoed_by_a_module_error_stays_out_of_condition_event_log_and_artifacts(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    process, runs = operator
    token = "tok-7Hq2-read-from-a-secret"
    client.CoreV1Api(kube_api).create_namespaced_secret(
        kube_namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="creds"), string_data={"token": token}),
    )
    # The role reads the Secret, then puts its token in a definition whose
    # parse error quotes the line: the module's message echoes the token.
    create(kube_api, kube_namespace, "Leak", "echo", scenario="echo", secret_name="creds")
    failure = condition(kube_api, kube_namespace, "Leak", "echo", "Failure")
    assert "Failed to load resource definition" in failure["message"]
    assert REDACTED in failure["message"]
    events = warning_messages(kube_api, kube_namespace, "echo")
    # Logged before the Failure was written: the log holds the whole run.
    assert f"reconcile failed kind=Leak namespace={kube_namespace} name=echo" in process.logs
    for leaked in forms(token):
        assert leaked not in failure["message"]
        assert leaked not in events
        assert leaked not in process.logs
    assert_artifacts_clean(object_dir(runs, "Leak", kube_namespace, "echo"), forms(token))


def test_a_secret_definition_echoed_by_a_module_error_stays_out_of_condition_event_and_log(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    process, runs = operator
    password = "pw-Mv40-in-a-broken-definition"
    # A YAML-string definition of a Secret that does not parse: the module's
    # message quotes the line holding the password.
    create(kube_api, kube_namespace, "Leak", "typo", scenario="echo_definition", password=password)
    failure = condition(kube_api, kube_namespace, "Leak", "typo", "Failure")
    assert "Failed to load resource definition" in failure["message"]
    events = warning_messages(kube_api, kube_namespace, "typo")
    # Logged before the Failure was written: the log holds the whole run.
    assert f"reconcile failed kind=Leak namespace={kube_namespace} name=typo" in process.logs
    for leaked in forms(password):
        assert leaked not in failure["message"]
        assert leaked not in events
        assert leaked not in process.logs
    assert_artifacts_clean(object_dir(runs, "Leak", kube_namespace, "typo"), forms(password))


def test_a_secret_given_as_a_string_definition_is_logged_redacted(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    process, runs = operator
    password = "pw-Zx81-in-a-string-definition"
    create(kube_api, kube_namespace, "Leak", "made", scenario="definition", password=password)
    condition(kube_api, kube_namespace, "Leak", "made", "Successful")
    made = client.CoreV1Api(kube_api).read_namespaced_secret("made-made", kube_namespace)
    assert base64.b64decode(made.data["password"]).decode() == password  # the role worked
    # Each event is logged as it comes, before the run ends and its status is written.
    assert (
        f"event kind=Leak namespace={kube_namespace} name=made event=runner_on_ok "
        "task='Create a Secret from a string definition'"
    ) in process.logs
    for leaked in forms(password):
        assert leaked not in process.logs
    assert_artifacts_clean(object_dir(runs, "Leak", kube_namespace, "made"), forms(password))


def test_a_failing_no_log_task_does_not_print_its_value(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    process, runs = operator
    password = "pw-Kq55-given-to-no-log-tasks"
    create(kube_api, kube_namespace, "Leak", "quiet", scenario="no_log", password=password)
    failure = condition(kube_api, kube_namespace, "Leak", "quiet", "Failure")
    assert "no_log" in failure["message"]  # Ansible's "the output has been hidden"
    events = warning_messages(kube_api, kube_namespace, "quiet")
    # Logged before the Failure was written: the log holds the whole run.
    assert f"reconcile failed kind=Leak namespace={kube_namespace} name=quiet" in process.logs
    assert f"ansible output kind=Leak namespace={kube_namespace} name=quiet" in process.logs
    for leaked in forms(password):
        assert leaked not in process.logs
        assert leaked not in events
        assert leaked not in failure["message"]
    directory = object_dir(runs, "Leak", kube_namespace, "quiet")
    # The cached fact holds the password: it is kept, redacted and private.
    assert [p for p in files_under(directory) if p.parent.name == "fact_cache"]
    assert_artifacts_clean(directory, forms(password))
