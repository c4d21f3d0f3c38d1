"""A Secret value with quotes, backslashes, `&`, `<>`, non-ASCII and a newline,
put by a role where the API server refuses it (a label value), is quoted
layer upon layer on its way out: Go's %q in the API server's JSON answer, a
bytes repr in the module's error, JSON in Ansible's event, a repr in the
operator's log. In none of its forms, nor in part, does it reach the Failure
condition, the Events, the operator's log or the artifacts kept on disk."""

from __future__ import annotations

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
from ansible_operator.runner.redaction import REDACTED
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.secret_forms import forms, fragments

pytestmark = pytest.mark.cluster
TOKEN = "Zq7x-\"wörd\\&€<'>\nKv9y-R2d2"
TASK = "Label a ConfigMap with the token"


@pytest.fixture(scope="module", params=RUNNER_MODES)
def operator(
    request: pytest.FixtureRequest,
    kube_cluster: Cluster,
    attack_crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[OperatorProcess, Path]]:
    scratch = tmp_path_factory.mktemp(f"redaction-forms-{request.param}")
    process, runs = start_logging_everything(kube_cluster, scratch, mode=request.param)
    yield process, runs
    process.stop()


def leaks(text: str, value: str) -> list[str]:
    """The forms of `value`, and the parts of it, that `text` holds."""
    found = [name for name, form in forms(value).items() if form in text]
    folded = text.casefold()
    return found + [repr(part) for part in fragments(value) if part.casefold() in folded]


def test_a_secret_value_refused_as_a_label_leaves_the_run_in_none_of_its_forms(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    process, runs = operator
    assert len(fragments(TOKEN)) == 3  # parts no escaping changes, to look for too
    client.CoreV1Api(kube_api).create_namespaced_secret(
        kube_namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="creds"), string_data={"token": TOKEN}),
    )
    create(kube_api, kube_namespace, "Leak", "label", scenario="label", secret_name="creds")

    failure = condition(kube_api, kube_namespace, "Leak", "label", "Failure")
    # Still useful: which task failed and why, the value cut out.
    assert TASK in failure["message"]
    assert "Invalid value" in failure["message"]
    assert REDACTED in failure["message"]
    events = warning_messages(kube_api, kube_namespace, "label")
    assert f"task failed kind=Leak namespace={kube_namespace} name=label task='{TASK}'" in (
        process.logs
    )
    # Logged before the Failure was written: the log holds the whole run.
    assert f"reconcile failed kind=Leak namespace={kube_namespace} name=label" in process.logs

    places = {"the Failure condition": failure["message"], "the Events": events}
    places["the operator's log"] = process.logs
    artifacts = list(files_under(object_dir(runs, "Leak", kube_namespace, "label")))
    assert artifacts, "no artifacts kept"
    for path in artifacts:
        places[str(path)] = path.read_text(errors="replace")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path} is not private"
    leaked = {place: found for place, text in places.items() if (found := leaks(text, TOKEN))}
    assert not leaked, f"the token leaks: {leaked}"
