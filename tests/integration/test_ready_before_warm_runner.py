"""The operator is ready (its controllers run, /readyz answers) while its warm
runner is still importing Ansible; an object's first run waits for the warm
runner and runs in it, not in reference mode. The warm runner is held at its
start until the test releases it, so the order is the test's, not the CPU's.
Real API server, real ansible-runner and ansible-core."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from greetings import OPERATOR, create, greeting, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

RELEASE_ENV = "ANSIBLE_OPERATOR_TEST_WARM_RELEASE"
# On the operator's PYTHONPATH: the warm runner (and only it) waits at its
# start for the release file, whether it is forked from the operator before
# the operator starts (zygote.py: the operator's only fork of itself) or,
# where that fork is not made, started as a program.
HOLD = f"""
import os, sys, time

def hold():
    release = os.environ.get("{RELEASE_ENV}")
    while release and not os.path.exists(release):
        time.sleep(0.05)

if "ansible_operator.runner.warm.run_server" in sys.orig_argv:
    hold()
elif "ansible_operator.cli" in sys.orig_argv:
    os.register_at_fork(after_in_child=hold)
"""


def test_ready_and_reconciling_before_the_warm_runner_is(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HOLD)
    release = tmp_path / "release"
    operator = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=[SERVE_METRICS],
        env={
            "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
            RELEASE_ENV: str(release),
        },
    ).start()
    try:
        assert operator.health("/readyz") == 200
        create(kube_api, kube_namespace, greeting("early", message="hi"))
        # Its reconcile began (the object is counted) and its run waits for
        # the warm runner, which is held.
        eventually(
            lambda: operator.metric("resource_created_at_seconds", name="early") > 0,
            what="the reconcile of the object created",
        )
        assert operator.metric("ansible_operator_warm_runner_pid") == 0  # none ready yet
        release.touch()
        eventually(
            lambda: operator.metric("ansible_operator_warm_runner_pid") > 0,
            what="the warm runner ready",
        )
        wait_successful(kube_api, kube_namespace, "early")
        used = operator.metric(
            "ansible_operator_acceleration_hits_total", acceleration="playbook-in-fork"
        )
        assert used > 0, "the first run did not use the warm runner"
        assert "running in reference mode instead" not in operator.logs
    finally:
        release.touch()
        operator.stop()
