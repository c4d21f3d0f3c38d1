"""Two replicas with --leader-elect: the leader is killed mid-run; the other
takes over within the lease, the dead leader's runs are gone before it does
(no object is run by both at once), and nothing is lost."""

from __future__ import annotations

import re

import pytest
from faultops import StartOperator, all_gone, converged, create
from kubernetes import client

from ansible_operator.runner import proctree

pytestmark = pytest.mark.cluster
LEASE_SECONDS = 4


def test_the_leader_killed_mid_run_is_replaced_and_nothing_is_lost(
    start_operator: StartOperator, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    args = [
        "--leader-elect",
        f"--leader-election-namespace={kube_namespace}",
        "--leader-election-id=fault-operator",
        f"--leader-elect-lease-duration={LEASE_SECONDS}s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
    ]
    leader = start_operator(args=args)
    standby = start_operator(args=args, wait_ready=False)
    standby.wait_for_log("waiting for leadership")
    names = [f"f{i}" for i in range(3)]
    for name in names:
        create(kube_api, kube_namespace, "Work", name, value=name, sleep=4)
    leader.wait_for_log("task kind=Work .* task='Take a while'", timeout=60)
    assert leader.process is not None
    processes = proctree.tree(leader.process.pid)
    leader.kill()
    all_gone(processes, timeout=LEASE_SECONDS)  # its runs end before a new leader can exist
    standby.wait_for_log("became leader", timeout=LEASE_SECONDS + 6)
    for name in names:
        assert converged(kube_api, kube_namespace, "Work", name)["status"]["value"] == name
    for name in names:
        assert re.search(rf"run succeeded kind=Work namespace=\S+ name={name} ", standby.logs)
    lease = client.CoordinationV1Api(kube_api).read_namespaced_lease(
        "fault-operator", kube_namespace
    )
    assert lease.spec.holder_identity and lease.spec.lease_transitions >= 1
