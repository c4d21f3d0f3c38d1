"""The status a GitOps tool reads: what kstatus (sigs.k8s.io/cli-utils, whose rules Argo
CD's and Flux's health checks follow; tools/kstatus-check, built here with Go) makes of
the objects a real operator reconciled: Current once Successful, InProgress while a new
generation is not reached or a failure is retried, Failed when only a change mends it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from greetings import GROUP, KINDS, OPERATOR, VERSION, create, greeting, patch_spec
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually, wait_for_condition
from go_tools import built

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kstatus() -> Path:
    return built("kstatus-check")


def verdict(kstatus: Path, obj: dict[str, Any]) -> tuple[str, str]:
    done = subprocess.run(
        [str(kstatus)], input=json.dumps([obj]), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    [answer] = json.loads(done.stdout)
    return answer["status"], answer["message"]


def read(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    found = KINDS.get(api, namespace, "Greeting", name)
    assert found is not None
    return found


@pytest.fixture
def operator(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace},
    ).start()
    yield process
    process.stop()


def test_gitops_tools_read_current_in_progress_and_failed_as_they_should(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str, kstatus: Path
) -> None:
    create(kube_api, kube_namespace, greeting("fine", greetingMessage="hi"))
    create(kube_api, kube_namespace, greeting("retrying", fail_with="the database is not up"))
    create(kube_api, kube_namespace, greeting("refused", ansibleBecomeExe="id"))

    def reached(name: str, condition: str) -> dict[str, Any]:
        return wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, name, condition, timeout=120
        )

    # Successful: Current, no custom health check needed.
    assert verdict(kstatus, reached("fine", "Successful"))[0] == "Current"
    # A failure the operator retries: InProgress, saying why.
    status, message = verdict(kstatus, reached("retrying", "Failure"))
    assert status == "InProgress" and message.endswith("failed: the database is not up")
    # Data that may not reach Ansible: no retry mends it: Failed, saying why.
    status, message = verdict(kstatus, reached("refused", "Failure"))
    assert status == "Failed" and "ansibleBecomeExe" in message

    # A new generation is InProgress until it is reconciled, then Current again.
    patch_spec(kube_api, kube_namespace, "fine", {"greetingMessage": "hello again"})
    assert verdict(kstatus, read(kube_api, kube_namespace, "fine"))[0] == "InProgress"
    eventually(
        lambda: verdict(kstatus, read(kube_api, kube_namespace, "fine"))[0] == "Current",
        timeout=120,
        what="the new generation reconciled",
    )
    final = read(kube_api, kube_namespace, "fine")
    assert final["status"]["observedGeneration"] == final["metadata"]["generation"] == 2
