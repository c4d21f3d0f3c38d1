"""The ring's hand-over protocol (sharding/ring.py) over an in-memory Lease
store: at every step of every replica's reads and writes, no bucket is
reconciled by two replicas, and every bucket a replica reconciles is in its
published Lease; the ring settles to the assignment as members join, leave
cleanly, and die."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

import pytest

from ansible_operator.kube.client import ApiError
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.observability.metrics import Metrics
from ansible_operator.sharding.assignment import assign
from ansible_operator.sharding.buckets import BUCKETS, parse_buckets
from ansible_operator.sharding.ring import (
    HELD_ANNOTATION,
    KEY_ANNOTATION,
    RING_LABEL,
    LocalShare,
    ShardRing,
)

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime


class LeaseStore:
    """The API server's Leases, with resourceVersions; each call yields to the
    other replicas and then checks the invariants."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.rings: list[ShardRing] = []
        self.watchers: list[asyncio.Queue[dict[str, Any]]] = []

    def tell(self, kind: str, lease: dict[str, Any]) -> None:
        for queue in self.watchers:
            queue.put_nowait({"type": kind, "object": copy.deepcopy(lease)})

    def check(self) -> None:
        owners: dict[int, str] = {}
        for ring in self.rings:
            lease = self.leases.get(ring.lease)
            published = (
                parse_buckets(lease["metadata"]["annotations"][HELD_ANNOTATION])
                if lease
                else frozenset()
            )
            assert _active(ring) <= published, f"{ring.identity} runs unpublished buckets"
            for bucket in _active(ring):
                assert bucket not in owners, (
                    f"bucket {bucket}: {owners[bucket]} and {ring.identity}"
                )
                owners[bucket] = ring.identity

    async def step(self) -> None:
        await asyncio.sleep(0)
        self.check()

    def client(self) -> FakeApi:
        return FakeApi(self)


class FakeApi:
    def __init__(self, store: LeaseStore) -> None:
        self.store = store

    async def list(self, _resource: Any, _namespace: str, **_options: Any) -> dict[str, Any]:
        await self.store.step()
        return {"metadata": {}, "items": copy.deepcopy(list(self.store.leases.values()))}

    async def watch(self, _resource: Any, _namespace: str, **_options: Any) -> Any:
        """Every Lease now, then each change (as the API server's watch without
        a resourceVersion)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for lease in self.store.leases.values():
            queue.put_nowait({"type": "ADDED", "object": copy.deepcopy(lease)})
        self.store.watchers.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self.store.watchers.remove(queue)

    async def get(self, _resource: Any, name: str, _namespace: str) -> dict[str, Any]:
        await self.store.step()
        if name not in self.store.leases:
            raise ApiError(404, "NotFound", name)
        return copy.deepcopy(self.store.leases[name])

    async def create(self, _resource: Any, body: dict[str, Any], _namespace: str) -> Any:
        await self.store.step()
        name = body["metadata"]["name"]
        if name in self.store.leases:
            raise ApiError(409, "AlreadyExists", name)
        return self._store(body)

    async def replace(self, _resource: Any, name: str, body: dict[str, Any], _ns: str) -> Any:
        await self.store.step()
        current = self.store.leases.get(name)
        if current is None:
            raise ApiError(404, "NotFound", name)
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", name)
        return self._store(body)

    async def delete(self, _resource: Any, name: str, _namespace: str) -> Any:
        await self.store.step()
        gone = self.store.leases.pop(name, None)
        if gone is not None:
            self.store.tell("DELETED", gone)
        return {}

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self.store.versions))
        name = stored["metadata"]["name"]
        self.store.tell("MODIFIED" if name in self.store.leases else "ADDED", stored)
        self.store.leases[name] = stored
        self.store.check()
        return copy.deepcopy(stored)


def _active(ring: ShardRing) -> frozenset[int]:
    """What the replica's share reconciles now."""
    assert isinstance(ring.share, LocalShare)
    return ring.share.share.active


def _ring(
    store: LeaseStore,
    identity: str,
    drained: asyncio.Event | None = None,
    *,
    retry_period: float = 0.01,
    lease_duration: float = 0.6,
) -> ShardRing:
    async def drain(_buckets: frozenset[int]) -> None:
        if drained is not None:
            await drained.wait()  # reconciles still in flight until the test says
        await asyncio.sleep(0)

    ring = ShardRing(
        store.client(),  # type: ignore[arg-type]
        LocalShare(ObjectShare(), drain),
        ring="r",
        namespace="ops",
        metrics=Metrics(),
        lease_duration=lease_duration,
        renew_deadline=min(0.4, lease_duration),
        retry_period=retry_period,
        identity=identity,
    )
    store.rings.append(ring)
    return ring


async def _settled(rings: list[ShardRing], within: float = 10.0) -> None:
    """Until each ring reconciles exactly its assigned buckets."""
    expected = assign(ring.identity for ring in rings)
    async with asyncio.timeout(within):
        while True:
            if all(_active(ring) == expected[ring.identity] for ring in rings):
                return
            await asyncio.sleep(0.01)


async def test_replicas_joining_at_once_split_the_space_without_overlap() -> None:
    store = LeaseStore()
    rings = [_ring(store, f"replica-{n}") for n in range(3)]
    await asyncio.gather(*(ring.join() for ring in rings))
    for ring in rings:
        ring.start()
    await _settled(rings)
    assert all(_active(ring) for ring in rings), "a member was left without a share"
    assert sum(len(_active(ring)) for ring in rings) == BUCKETS
    for ring in rings:
        await ring.leave()


async def test_a_joiner_waits_for_the_holder_to_drain_before_it_starts() -> None:
    store = LeaseStore()
    drained = asyncio.Event()
    first = _ring(store, "replica-0", drained)
    await first.join()
    first.start()
    await _settled([first])
    second = _ring(store, "replica-1")
    await second.join()
    second.start()
    await asyncio.sleep(0.2)  # many rounds of both: the holder is still draining
    assert not _active(second), "started buckets whose runs had not ended elsewhere"
    assert len(_active(first)) < BUCKETS, "the holder kept starting what it hands over"
    drained.set()
    await _settled([first, second])
    assert _active(second)
    for ring in (first, second):
        await ring.leave()


async def test_a_clean_leave_hands_over_at_once_and_a_dead_member_after_expiry() -> None:
    store = LeaseStore()
    rings = [_ring(store, f"replica-{n}") for n in range(3)]
    for ring in rings:
        await ring.join()
        ring.start()
    await _settled(rings)
    await rings[0].leave()
    store.rings.remove(rings[0])
    await _settled(rings[1:], within=0.5)  # well within a lease duration
    # Killed: stops renewing, its Lease stays until others see it unchanged for 0.6 s.
    dead = rings[1]
    assert dead._runner is not None
    dead._runner.cancel()
    dead_share = _active(dead)
    await asyncio.sleep(0.3)
    assert not (_active(rings[2]) & dead_share), "took a share before its Lease expired"
    store.rings.remove(dead)
    await _settled(rings[2:])
    await rings[2].leave()


async def test_a_replica_whose_lease_was_deleted_stops_everything() -> None:
    store = LeaseStore()
    ring = _ring(store, "replica-0")
    await ring.join()
    ring.start()
    await _settled([ring])
    del store.leases[ring.lease]
    await asyncio.wait_for(ring.lost.wait(), 5)
    assert not _active(ring)


async def test_a_member_keyed_by_namespace_holds_every_bucket_until_it_leaves() -> None:
    """A replica of the version that keyed objects by namespace (a rolling
    update): its buckets are not this version's, so none is claimed while it lives."""
    store = LeaseStore()
    store.leases["r-old"] = {
        "metadata": {
            "name": "r-old",
            "resourceVersion": "0",
            "labels": {RING_LABEL: "r"},
            "annotations": {HELD_ANNOTATION: "0-20", "ansible-operator.io/shard-buckets": "64"},
        },
        "spec": {"holderIdentity": "old"},
    }
    ring = _ring(store, "replica-0")
    await ring.join()
    ring.start()
    await asyncio.sleep(0.1)  # many rounds
    assert not _active(ring), "claimed buckets an older replica may be reconciling"
    lease = store.leases[ring.lease]
    assert lease["metadata"]["annotations"][KEY_ANNOTATION] == "object.metadata.uid"
    del store.leases["r-old"]  # it left
    await _settled([ring])
    await ring.leave()


async def test_members_move_at_once_when_another_s_lease_changes_not_a_retry_period_later() -> None:
    """Rounds every 30 s (and leases of 60): joining, handing over and leaving
    still settle within moments, each member woken by the others' Leases."""
    store = LeaseStore()
    slow = {"retry_period": 30.0, "lease_duration": 60.0}
    first = _ring(store, "replica-0", **slow)  # type: ignore[arg-type]
    await first.join()
    first.start()
    second = _ring(store, "replica-1", **slow)  # type: ignore[arg-type]
    await second.join()
    second.start()
    await _settled([first, second], within=0.5)
    assert _active(first) and _active(second)
    await first.leave()
    store.rings.remove(first)
    await _settled([second], within=0.5)
    await second.leave()
