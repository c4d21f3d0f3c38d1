"""A warm runner that dies while the operator runs (what the OOM killer does to
the largest process of a Pod over its memory limit) is replaced: the operator
says so, reaps it, starts another, and the runs after it are warm runs again,
not failures nor reference-mode runs. Real API server, real ansible-runner and
ansible-core; the attack is a real SIGKILL."""

from __future__ import annotations

import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest
from greetings import OPERATOR, create, greeting, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

HITS = r'^ansible_operator_acceleration_hits_total\{acceleration="playbook-in-fork"\} (\S+)$'
RESTARTS = r"^ansible_operator_warm_runner_restarts_total (\S+)$"


def test_a_killed_warm_runner_is_replaced_and_runs_stay_warm(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    operator = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=["--metrics-bind-address=127.0.0.1:0"],
    ).start()
    try:
        port = operator.wait_for_log(r"metrics server listening address=\('[\d.]+', (\d+)\)")
        create(kube_api, kube_namespace, greeting("before", message="hi"))
        wait_successful(kube_api, kube_namespace, "before")
        first = int(operator.wait_for_log(r"warm runner ready pid=(\d+)").group(1))
        hits_before = _metric(port.group(1), HITS)
        assert hits_before > 0, "the first run did not use the warm runner"

        os.kill(first, signal.SIGKILL)
        gone = operator.wait_for_log(
            rf"the warm runner exited pid={first} \(killed by SIGKILL\).*starting another"
        )
        second = int(
            operator.wait_for_log(r"warm runner ready pid=(\d+)", after=gone.end()).group(1)
        )
        assert second != first
        eventually(lambda: not _zombie_of(first, operator), what="the dead warm runner reaped")

        create(kube_api, kube_namespace, greeting("after", message="hello"))
        wait_successful(kube_api, kube_namespace, "after")
        assert _metric(port.group(1), RESTARTS) == 1
        # Counted only by a living warm runner's runs, and carried over its death.
        assert _metric(port.group(1), HITS) > hits_before
        assert "running in reference mode instead" not in operator.logs
    finally:
        operator.stop()


def _zombie_of(pid: int, operator: OperatorProcess) -> bool:
    """`pid` is a process the operator has not reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    state, parent = stat.rpartition(")")[2].split()[:2]
    return state == "Z" and operator.process is not None and int(parent) == operator.process.pid


def _metric(port: str, pattern: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(pattern, text, re.M)
    assert found, f"no {pattern} in the metrics"
    return float(found.group(1))
