"""A replica of a shard ring keeps its Lease, and its share, while the
operator's event loop is blocked for longer than the lease: the ring runs on
its own thread (sharding/ring_thread.py), against the real API server, with a
second member that would take the buckets of an expired Lease."""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.kube.config import load_config
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.observability.metrics import Metrics
from ansible_operator.sharding.buckets import BUCKETS, parse_buckets
from ansible_operator.sharding.ring import HELD_ANNOTATION, RING_LABEL
from ansible_operator.sharding.ring_thread import ShardRingThread

pytestmark = pytest.mark.cluster

RING = "blocked-loop"
DURATIONS = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5}
BLOCK = 10.0  # seconds the main loop is held: past the renew deadline and the lease


async def _no_runs(_buckets: frozenset[int]) -> None:
    return None


def _member(cluster: Cluster, namespace: str, identity: str) -> tuple[ShardRingThread, ObjectShare]:
    share = ObjectShare()
    ring = ShardRingThread(
        load_config(cluster.kubeconfig),
        share,
        _no_runs,
        ring=RING,
        namespace=namespace,
        metrics=Metrics(),
        identity=identity,
        on_wedged=lambda: pytest.fail(f"{identity} saw its loss unheard"),
        **DURATIONS,
    )
    return ring, share


def _held(kube_api: client.ApiClient, namespace: str) -> dict[str, tuple[frozenset[int], str]]:
    """Each member's published buckets and renewTime."""
    leases = client.CoordinationV1Api(kube_api).list_namespaced_lease(
        namespace, label_selector=f"{RING_LABEL}={RING}"
    )
    return {
        lease.spec.holder_identity: (
            parse_buckets(lease.metadata.annotations.get(HELD_ANNOTATION, "")),
            str(lease.spec.renew_time),
        )
        for lease in leases.items
    }


def hold_the_loop(
    kube_api: client.ApiClient, namespace: str
) -> list[dict[str, tuple[frozenset[int], str]]]:
    """Block the calling event loop for BLOCK seconds (synchronous calls only, as a
    slow callback would), reading the ring's Leases meanwhile."""
    seen = []
    end = time.monotonic() + BLOCK
    while time.monotonic() < end:
        seen.append(_held(kube_api, namespace))
        time.sleep(0.2)  # still the attack: the loop stays held
    return seen


async def test_a_member_keeps_its_lease_and_share_while_its_event_loop_is_blocked(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    blocked, blocked_share = _member(kube_cluster, kube_namespace, "blocked")
    await asyncio.wait_for(blocked.join(), 30)
    every = frozenset(range(BUCKETS))
    assert blocked_share.active == every  # alone in the ring: every bucket
    other, other_share = _member(kube_cluster, kube_namespace, "other")
    await asyncio.wait_for(other.join(), 30)
    try:
        seen = hold_the_loop(kube_api, kube_namespace)
        await asyncio.sleep(0.1)  # what the threads told this loop meanwhile, it hears now

        renewals = {held["blocked"][1] for held in seen}
        assert len(renewals) >= BLOCK / DURATIONS["lease_duration"], seen[-1]
        assert not blocked.lost.is_set()
        # The newcomer got its share from the blocked member (whose drain waited for
        # its loop) only after the loop ran again; meanwhile no bucket was held twice.
        for held in seen:
            assert not held["blocked"][0] & held.get("other", (frozenset(), ""))[0], held

        async def split() -> None:
            while True:
                if other_share.active and blocked_share.active | other_share.active == every:
                    return
                await asyncio.sleep(0.1)

        await asyncio.wait_for(split(), 30)
        assert not blocked_share.active & other_share.active
    finally:
        await other.leave()
        await blocked.leave()
    assert _held(kube_api, kube_namespace) == {}  # both left: their Leases deleted
