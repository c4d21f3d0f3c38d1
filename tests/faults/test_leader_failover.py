"""Two replicas with --leader-elect: the leader is killed mid-run; the other
takes over within the lease, the dead leader's runs are gone before it does
(no object is run by both at once), and nothing is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from faultops import GROUP, VERSION, StartOperator, all_gone, converged, create
from kubernetes import client

from ansible_operator.runner import proctree
from ansible_operator.testing.metrics import gvk_label
from ansible_operator.testing.operator import SERVE_METRICS
from ansible_operator.testing.waiting import eventually
from holds import Hold

pytestmark = pytest.mark.cluster
LEASE_SECONDS = 4


def test_the_leader_killed_mid_run_is_replaced_and_nothing_is_lost(
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    args = [
        "--leader-elect",
        f"--leader-election-namespace={kube_namespace}",
        "--leader-election-id=fault-operator",
        f"--leader-elect-lease-duration={LEASE_SECONDS}s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        SERVE_METRICS,
    ]
    leader = start_operator(args=args)
    leader.wait_leading()
    standby = start_operator(args=args)  # ready: standing by
    hold = Hold(tmp_path)
    names = [f"f{i}" for i in range(3)]
    for name in names:
        create(kube_api, kube_namespace, "Work", name, value=name, hold=str(hold.path))
    hold.wait_reached()  # the leader is mid-run
    assert leader.process is not None
    processes = proctree.tree(leader.process.pid)
    leader.kill()
    all_gone(processes, timeout=LEASE_SECONDS)  # its runs end before a new leader can exist
    hold.release()
    leases = client.CoordinationV1Api(kube_api)
    eventually(
        lambda: (
            leases.read_namespaced_lease("fault-operator", kube_namespace).spec.holder_identity
            == standby.lease_identity()
        ),
        timeout=LEASE_SECONDS + 6,
        what="the standby holding the Lease",
    )
    for name in names:
        assert converged(kube_api, kube_namespace, "Work", name)["status"]["value"] == name
    # The dead leader's runs are gone: the standby ran every object again.
    succeeded = standby.metric(
        "ansible_operator_reconcile_result_total",
        GVK=gvk_label(GROUP, VERSION, "Work"),
        result="succeeded",
    )
    assert succeeded >= len(names)
    lease = leases.read_namespaced_lease("fault-operator", kube_namespace)
    assert lease.spec.lease_transitions >= 1
