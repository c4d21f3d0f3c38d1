"""The leader keeps its Lease while its runs saturate the CPU (more runs than
cores, at the operator's own priority), and the operator still answers its
probes: leadership renews on its own thread, not behind runs, events or a
starved event loop (issue 27: "leader election lost" restart loops)."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
import uuid

import pytest
from faultops import StartOperator, create, get
from kubernetes import client

from ansible_operator.testing.metrics import metric_value
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess

pytestmark = pytest.mark.cluster

BURNERS = 6  # concurrent runs, each keeping a core busy: more than this machine's cores
BURN_SECONDS = 20  # five lease durations: a starved renewal loses the Lease in one
POLL = 0.5
PROBE_BOUND = 5.0  # seconds: generous; a kubelet's default probe timeout is 1s


def timed_readyz(operator: OperatorProcess) -> tuple[int, float]:
    """/readyz's status and how long it took to answer."""
    port = operator.port("health")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=30) as r:
            status = r.status
    except urllib.error.HTTPError as error:
        status = error.code
    return status, time.monotonic() - started


def test_the_leader_keeps_its_lease_while_runs_saturate_the_cpu(
    start_operator: StartOperator, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    lease_id = f"burn-{uuid.uuid4().hex[:8]}"
    leader = start_operator(
        args=[
            "--leader-elect",
            f"--leader-election-namespace={kube_namespace}",
            f"--leader-election-id={lease_id}",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=1s",
            f"--max-concurrent-reconciles={BURNERS}",
            f"--max-concurrent-runs={BURNERS}",
            "--reconcile-run-nice=0",  # runs compete with the operator as equals
            SERVE_METRICS,
        ]
    )
    leader.wait_leading()
    leases = client.CoordinationV1Api(kube_api)
    before = leases.read_namespaced_lease(lease_id, kube_namespace).spec
    assert before.holder_identity == leader.lease_identity()
    names = [f"burn-{i}" for i in range(BURNERS)]
    for name in names:
        create(kube_api, kube_namespace, "Burn", name, seconds=BURN_SECONDS)

    latencies: list[float] = []
    most_in_flight = 0.0
    deadline = time.monotonic() + BURN_SECONDS + 180
    while True:
        assert leader.process is not None and leader.process.poll() is None, leader.logs[-4000:]
        status, took = timed_readyz(leader)
        assert status == 200, f"/readyz answered {status} under load"
        latencies.append(took)
        spec = leases.read_namespaced_lease(lease_id, kube_namespace).spec
        assert spec.holder_identity == before.holder_identity, "the Lease changed hands"
        assert spec.lease_transitions == before.lease_transitions
        in_flight = metric_value(leader.exposition(), "ansible_operator_runs_in_flight")
        most_in_flight = max(most_in_flight, in_flight)
        burned = [(get(kube_api, kube_namespace, "Burn", n) or {}).get("status") for n in names]
        if all(s and "burned" in s for s in burned):
            break
        assert time.monotonic() < deadline, f"the burns did not finish: {burned}"
        time.sleep(POLL)  # the poll interval, not a wait for a condition

    exposition = leader.exposition()
    blocked_max = metric_value(exposition, "ansible_operator_event_loop_blocked_seconds_max")
    lags = metric_value(exposition, "ansible_operator_event_loop_lag_seconds_count")
    print(
        f"\nreadyz under load: polls={len(latencies)} max={max(latencies):.3f}s "
        f"mean={sum(latencies) / len(latencies):.3f}s; runs in flight at most "
        f"{most_in_flight:g} on {os.cpu_count()} CPUs; event loop blocked at most "
        f"{blocked_max:.3f}s over {lags:g} heartbeats"
    )
    assert most_in_flight > (os.cpu_count() or 1), "the runs never outnumbered the cores"
    assert max(latencies) < PROBE_BOUND
    assert "ansible_operator_event_loop_blocked_seconds_max" in exposition
    assert lags > 0
    assert "leadership lost" not in leader.logs
    assert "lease renewal failed" not in leader.logs
    after = leases.read_namespaced_lease(lease_id, kube_namespace).spec
    assert after.holder_identity == before.holder_identity
    assert after.lease_transitions == before.lease_transitions
    assert leader.stop() == 0
