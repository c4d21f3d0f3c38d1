"""A warm runner that dies while the operator runs (what the OOM killer does to
the largest process of a Pod over its memory limit) is replaced: the operator
says so, reaps it, starts another, and the runs after it are warm runs again,
not failures nor reference-mode runs. Real API server, real ansible-runner and
ansible-core; the attack is a real SIGKILL."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from greetings import OPERATOR, create, greeting, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster


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
        args=[SERVE_METRICS],
    ).start()
    try:
        create(kube_api, kube_namespace, greeting("before", message="hi"))
        wait_successful(kube_api, kube_namespace, "before")
        first = int(operator.metric("ansible_operator_warm_runner_pid"))
        assert first > 0
        hits_before = _warm_hits(operator)
        assert hits_before > 0, "the first run did not use the warm runner"

        os.kill(first, signal.SIGKILL)
        second = eventually(
            lambda: (
                int(operator.metric("ansible_operator_warm_runner_pid")) not in (0, first)
                and int(operator.metric("ansible_operator_warm_runner_pid"))
            ),
            what="another warm runner ready",
        )
        assert second != first
        # What the operator's user reads of it.
        assert re.search(
            rf"the warm runner exited pid={first} \(killed by SIGKILL\).*starting another",
            operator.logs,
        )
        eventually(lambda: not _zombie_of(first, operator), what="the dead warm runner reaped")

        create(kube_api, kube_namespace, greeting("after", message="hello"))
        wait_successful(kube_api, kube_namespace, "after")
        assert operator.metric("ansible_operator_warm_runner_restarts_total") == 1
        # Counted only by a living warm runner's runs, and carried over its death.
        assert _warm_hits(operator) > hits_before
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


def _warm_hits(operator: OperatorProcess) -> float:
    """Runs played in a warm runner's fork: only a living warm runner counts them."""
    return operator.metric(
        "ansible_operator_acceleration_hits_total", acceleration="playbook-in-fork"
    )
