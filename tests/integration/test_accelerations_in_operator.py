"""The operator says at start which warm-runner accelerations are on and
why the others are off, and exposes both, with how often each was used, as
metrics; a name it does not know stops it with the list it knows. Real API
server, real ansible-runner and ansible-core."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from greetings import OPERATOR, create, greeting, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.runner.warm.accelerations import names
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def operator(
    kube_cluster: Cluster, test_crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path_factory.mktemp("operator") / "operator.log",
        args=[
            "--metrics-bind-address=127.0.0.1:0",
            "--disable-acceleration=pty-close-without-delay",
        ],
    ).start()
    yield process
    process.stop()


def metric(text: str, name: str, acceleration: str) -> float:
    found = re.search(rf'^{name}{{acceleration="{acceleration}"}} (\S+)$', text, re.M)
    assert found, f"no {name} for {acceleration} in the exposition"
    return float(found.group(1))


def test_accelerations_are_logged_at_start_and_exposed_with_their_use(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    enabled = "ansible_operator_acceleration_enabled"
    # Exposed once the warm runner is ready, with each acceleration's verdict.
    eventually(lambda: enabled in operator.exposition(), timeout=60, what="the warm runner ready")
    # What the operator's user reads at start: which are on, and why one is off.
    on = re.search(r"warm runner ready pid=\d+ accelerations on: (.*)", operator.logs)
    assert on is not None
    assert set(on.group(1).split(", ")) == set(names()) - {"pty-close-without-delay"}
    assert (
        "warm runner acceleration pty-close-without-delay off, stock behaviour: "
        "switched off (--disable-acceleration)"
    ) in operator.logs
    create(kube_api, kube_namespace, greeting("accelerated", message="hi"))
    wait_successful(kube_api, kube_namespace, "accelerated")
    text = operator.exposition()
    hits = "ansible_operator_acceleration_hits_total"
    assert metric(text, enabled, "pty-close-without-delay") == 0
    assert metric(text, hits, "pty-close-without-delay") == 0
    for name in ("playbook-in-fork", "template-cache", "warm-module-interpreter", "task-inline"):
        assert metric(text, enabled, name) == 1
        assert metric(text, hits, name) > 0, name


def test_an_unknown_acceleration_name_stops_start_up_with_the_known_ones(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ansible_operator.cli",
            "run",
            f"--watches-file={OPERATOR / 'watches.yaml'}",
            "--disable-acceleration=template-cache,tmeplate-cache",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "no acceleration named tmeplate-cache; there are: playbook-in-fork," in result.stderr
