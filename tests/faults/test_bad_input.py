"""Bad input refused clearly and losing nothing: a malformed watches file
stops start-up with `file:line: message`; a bad object gets a Failure and an
Event naming the problem while every other object is served."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from faultops import OPERATOR, StartOperator, converged, create, failed
from kubernetes import client

from ansible_operator.testing.reading import config_map, events_for
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster
ROLE = OPERATOR / "roles" / "work"
GOOD = f"""- version: v1alpha1
  group: faults.ansible-operator.io
  kind: Work
  role: {ROLE}
"""


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (GOOD + "  reconcilePeriod: [1m\n", 5, "invalid YAML"),
        (GOOD + "  reconcilePerid: 1m\n", 5, "unknown key 'reconcilePerid' (did you mean"),
        (GOOD + "  manageStatus: perhaps\n", 5, "manageStatus"),
        (GOOD.replace(str(ROLE), "no_such_role"), 4, "role 'no_such_role' not found"),
        (GOOD.replace(f"role: {ROLE}", "playbook: missing.yml"), 4, "missing.yml"),
        (GOOD + GOOD, 5, "already defined at"),
        (GOOD + "  reconcilePeriod: 5 parsecs\n", 5, "reconcilePeriod"),
        (
            GOOD + "  selector:\n    matchExpressions:\n      - {key: app, operator: Near}\n",
            7,
            "operator",
        ),
    ],
    ids=[
        "bad-yaml",
        "unknown-key",
        "wrong-type",
        "missing-role",
        "missing-playbook",
        "duplicate-gvk",
        "bad-duration",
        "bad-selector",
    ],
)
def test_a_malformed_watches_file_stops_start_up_with_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    watches = tmp_path / "watches.yaml"
    watches.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "ansible_operator.cli", "run", f"--watches-file={watches}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "KUBECONFIG": str(tmp_path / "no-cluster-needed")},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert f"{watches}:{line}:" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr


def nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {"leafValue": "bottom"}
    for level in range(depth):
        value = {f"level{level}": value}
    return value


def test_odd_spec_keys_reach_the_role_or_fail_clearly(
    start_operator: StartOperator, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    operator = start_operator()
    spec = {"": "empty", "größeÜnïcode": "u", "deep": nested(64), "big": "x" * 1_000_000}
    create(kube_api, kube_namespace, "Echo", "odd", **spec)
    create(kube_api, kube_namespace, "Echo", "clash", fooBar=1, foo_bar=2)
    create(kube_api, kube_namespace, "Work", "plain", value="p")

    converged(kube_api, kube_namespace, "Echo", "odd")
    echo = config_map(kube_api, kube_namespace, "odd-echo")
    assert echo == {
        "empty_key": "empty",
        "unicode": "u",
        "deepest": '"leaf_value": "bottom"',
        "big_length": "1000000",
    }
    failure = failed(kube_api, kube_namespace, "Echo", "clash")
    assert failure["reason"] == "InvalidSpec"
    assert "'fooBar' and 'foo_bar'" in failure["message"]
    assert "InvalidSpec" in {e.reason for e in events_for(kube_api, kube_namespace, "clash")}
    assert converged(kube_api, kube_namespace, "Work", "plain")["status"]["value"] == "p"
    assert operator.process is not None and operator.process.poll() is None


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        ("ansible.sdk.operatorframework.io/reconcile-period", "abc"),
        ("ansible.sdk.operatorframework.io/verbosity", "x"),
    ],
)
def test_a_bad_annotation_is_a_failure_naming_it_and_others_are_served(
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    annotation: str,
    value: str,
) -> None:
    start_operator()
    create(
        kube_api, kube_namespace, "Work", "annotated", value="a", annotations={annotation: value}
    )
    create(kube_api, kube_namespace, "Work", "plain", value="p")
    failure = failed(kube_api, kube_namespace, "Work", "annotated")
    assert failure["reason"] == "InvalidAnnotation"
    assert annotation in failure["message"] and repr(value) in failure["message"]
    eventually(
        lambda: any(
            e.reason == "InvalidAnnotation" and annotation in e.message
            for e in events_for(kube_api, kube_namespace, "annotated")
        ),
        timeout=30,
        what="an InvalidAnnotation Event naming the annotation",
    )
    assert converged(kube_api, kube_namespace, "Work", "plain")["status"]["value"] == "p"


def test_a_role_removed_while_running_is_a_failure_naming_its_path(
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    project = tmp_path / "operator"
    shutil.copytree(OPERATOR, project)
    start_operator(watches=project / "watches.yaml")
    create(kube_api, kube_namespace, "Work", "before", value="b")
    converged(kube_api, kube_namespace, "Work", "before")
    shutil.rmtree(project / "roles" / "work")
    create(kube_api, kube_namespace, "Work", "after", value="a")
    failure = failed(kube_api, kube_namespace, "Work", "after")
    assert str(project / "roles") in failure["message"], failure["message"]
    assert "work" in failure["message"]
