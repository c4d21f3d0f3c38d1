"""A failed run says where, in the object's Failure condition and its Warning
Event: the task and its file:line, or the file:line of a playbook that does
not parse. The test operator (tests/operator) against a real API server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from greetings import GROUP, OPERATOR, VERSION, create, greeting
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import events_for
from ansible_operator.testing.waiting import condition_of, eventually, wait_for_condition

pytestmark = pytest.mark.cluster


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def operator(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    # Its working directory is tests/operator, as an image's is its project.
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace},
    ).start()
    yield process
    process.stop()


def failure_and_event(
    api: client.ApiClient, namespace: str, plural: str, name: str
) -> tuple[str, str]:
    obj = wait_for_condition(api, GROUP, VERSION, plural, namespace, name, "Failure")
    condition = condition_of(obj, "Failure")["message"]
    warnings = eventually(
        lambda: [e.message for e in events_for(api, namespace, name) if e.type == "Warning"],
        what=f"a Warning Event about {name}",
    )
    return condition, warnings[0]


def test_failure_condition_and_event_name_the_task_and_its_file_and_line(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    line = line_of(OPERATOR / "roles/greeting/tasks/main.yml", "- name: Fail when asked to")
    expected = (
        f'task "Fail when asked to" (roles/greeting/tasks/main.yml:{line}) failed: '
        "the database is on fire"
    )
    create(kube_api, kube_namespace, greeting("sad", failWith="the database is on fire"))
    condition, event = failure_and_event(kube_api, kube_namespace, "greetings", "sad")
    assert condition == expected
    assert event == expected


def test_a_playbook_that_does_not_parse_is_a_failure_at_its_file_and_line(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    broken = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Broken", "metadata": {"name": "b"}}
    create(kube_api, kube_namespace, broken | {"spec": {}})
    condition, event = failure_and_event(kube_api, kube_namespace, "brokens", "b")
    # Where Ansible's YAML parser gave up: the end of the unterminated string.
    where = re.compile(r"without reporting results: playbooks/broken\.yml:9: .*YAML")
    assert where.search(condition), condition
    assert where.search(event), event
