"""The leader keeps its Lease while the operator's event loop is blocked for
longer than the lease: renewal runs on its own thread (manager/leader_thread.py),
against the real API server, with a standby ready to take over."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import load_config
from ansible_operator.manager.leader import LeaderElector
from ansible_operator.manager.leader_thread import LeaderElectionThread

pytestmark = pytest.mark.cluster

LEASE = "blocked-loop"
DURATIONS = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5}
BLOCK = 10.0  # seconds the main loop is held: past the renew deadline and the lease


def hold_the_loop(kube_api: client.ApiClient, namespace: str) -> list[tuple[str, str, int]]:
    """Block the calling event loop for BLOCK seconds (synchronous calls only,
    as a slow callback would), reading the Lease meanwhile: (holder, renewTime,
    leaseTransitions) per read."""
    leases = client.CoordinationV1Api(kube_api)
    seen = []
    end = time.monotonic() + BLOCK
    while time.monotonic() < end:
        spec = leases.read_namespaced_lease(LEASE, namespace).spec
        seen.append((spec.holder_identity, str(spec.renew_time), spec.lease_transitions))
        time.sleep(0.2)  # still the attack: the loop stays held
    return seen


def elector_thread(kubeconfig: Path, namespace: str, identity: str) -> LeaderElectionThread:
    return LeaderElectionThread(
        load_config(kubeconfig),
        name=LEASE,
        namespace=namespace,
        identity=identity,
        on_wedged=lambda: pytest.fail(f"{identity} saw its loss unheard"),
        **DURATIONS,
    )


async def test_the_leader_keeps_the_lease_while_its_event_loop_is_blocked(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    leader = elector_thread(kube_cluster.kubeconfig, kube_namespace, "leader")
    await asyncio.wait_for(leader.acquire(), 30)
    other = elector_thread(kube_cluster.kubeconfig, kube_namespace, "standby")
    standing_by = asyncio.create_task(other.acquire())
    await asyncio.sleep(0)  # its thread starts: it campaigns through the block
    try:
        seen = hold_the_loop(kube_api, kube_namespace)
        await asyncio.sleep(0)  # what the threads told this loop meanwhile, it hears now

        assert {holder for holder, _, _ in seen} == {"leader"}, seen
        assert len({transitions for _, _, transitions in seen}) == 1, seen
        renewals = len({renewed for _, renewed, _ in seen})
        # One renewal every retry period: far more than the lease needs.
        assert renewals >= BLOCK / DURATIONS["lease_duration"], seen
        assert not leader.lost.is_set()
        assert not standing_by.done()

        # A clean stop hands the Lease over at once.
        await leader.release()
        await asyncio.wait_for(standing_by, 30)
    finally:
        standing_by.cancel()
        await leader.release()
        await other.release()
    lease = client.CoordinationV1Api(kube_api).read_namespaced_lease(LEASE, kube_namespace)
    assert lease.spec.holder_identity in ("standby", None)


async def test_the_attack_ends_a_leader_that_renews_on_the_blocked_loop(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    """The same block against a LeaderElector on the blocked loop itself, as the
    manager ran it before: the standby takes over and the leader is lost, so the
    test above measures the thread, not a harmless block."""
    async with ApiClient(load_config(kube_cluster.kubeconfig)) as api:
        leader = LeaderElector(
            api, name=LEASE, namespace=kube_namespace, identity="leader", **DURATIONS
        )
        await asyncio.wait_for(leader.acquire(), 30)
        other = elector_thread(kube_cluster.kubeconfig, kube_namespace, "standby")
        standing_by = asyncio.create_task(other.acquire())
        await asyncio.sleep(0)  # its thread starts: it campaigns through the block
        try:
            seen = hold_the_loop(kube_api, kube_namespace)
            assert seen[-1][0] == "standby", seen
            await asyncio.wait_for(leader.lost.wait(), 30)
            await asyncio.wait_for(standing_by, 30)
        finally:
            standing_by.cancel()
            leader.stop_renewing()
            await other.release()


async def test_a_leader_that_loses_the_lease_while_its_loop_is_wedged_exits(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    """The loss cannot reach a loop that never runs: the election thread ends the
    process itself (os._exit(1) in the operator; recorded here) within a lease
    duration, so this replica's runs do not go on beside the new leader's."""
    wedged = threading.Event()
    leader = LeaderElectionThread(
        load_config(kube_cluster.kubeconfig),
        name=LEASE,
        namespace=kube_namespace,
        identity="leader",
        on_wedged=wedged.set,
        **DURATIONS,
    )
    await asyncio.wait_for(leader.acquire(), 30)
    try:
        # The attack, all while the loop is held: another holder takes the Lease.
        leases = client.CoordinationV1Api(kube_api)
        leases.patch_namespaced_lease(
            LEASE, kube_namespace, {"spec": {"holderIdentity": "intruder"}}
        )
        exited_while_held = wedged.wait(BLOCK + DURATIONS["lease_duration"])
        assert exited_while_held, "the election thread waited for a loop that never ran"
        await asyncio.wait_for(leader.lost.wait(), 10)  # and the loop hears it once it runs
    finally:
        await leader.release()
