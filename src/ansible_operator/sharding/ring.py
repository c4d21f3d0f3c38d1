"""A ring of replicas that share the objects, kept in coordination Leases.

Each replica holds a Lease of its own (`<ring>-<identity>`, labelled with the
ring) in the operator's namespace and renews it every retry period; the live
Leases are the members. Every member computes the same assignment of the 64
hash buckets (sharding/assignment.py) from the members' identities. What a
member reconciles is not what it is assigned but what it *holds*: the buckets
named in its Lease's `ansible-operator.io/shards-held` annotation, which it
publishes before it starts them and withdraws only after it has stopped them.

Hand-over, so that no object is ever reconciled by two replicas at once:

- A bucket assigned elsewhere is released: its objects leave the replica's
  scope at once (no new reconcile starts), its in-flight reconciles are
  waited for (cancelled after the graceful-shutdown timeout), and only then
  is it removed from the Lease.
- A bucket assigned here is claimed only if no other live member holds it:
  written into our Lease first, then every Lease read again (a consistent
  read from the API server); if another member holds it by then, the claim
  is withdrawn. Of two members that claim one bucket at once (their views of
  the membership differed for a moment), the one that reads second sees the
  other's claim; if both see both, both withdraw and the next round, with
  the views agreed, settles it.
- A member's Lease is live while it changes: a Lease unchanged for a lease
  duration, by this replica's own clock, is expired (as client-go judges
  leader Leases), and its buckets are free. A member that has not renewed
  within the renew deadline (shorter) stops reconciling and exits first
  (`lost`), so it has stopped before anyone takes its buckets.
- A clean shutdown stops the runs, then deletes the Lease: its buckets are
  free at once.

When: every retry period (the Lease's renewal), and at once when another
member's Lease comes, goes or changes the buckets it holds (a watch of the
ring's Leases), and when one is due to expire. So a bucket released or left
by a clean shutdown is claimed within moments, not at the next retry period,
and a dead member's buckets as soon as its Lease has gone unchanged for a
lease duration (the watch times each Lease's last change as it happens).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.lease_thread import LEASES
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.observability.metrics import Metrics
from ansible_operator.sharding.assignment import assign
from ansible_operator.sharding.buckets import (
    BUCKETS,
    SHARD_KEY,
    format_buckets,
    parse_buckets,
    shard_selector,
)

log = logging.getLogger("ansible_operator.sharding")

RING_LABEL = "ansible-operator.io/shard-ring"
HELD_ANNOTATION = "ansible-operator.io/shards-held"
BUCKETS_ANNOTATION = "ansible-operator.io/shard-buckets"
# What the buckets are buckets of. A member keyed otherwise (a replica of a
# version that keyed objects by namespace, during a rolling update) is taken
# as holding every bucket until it leaves or expires: its buckets are not ours.
KEY_ANNOTATION = "ansible-operator.io/shard-key"
EVERY_BUCKET = frozenset(range(BUCKETS))

Drain = Callable[[frozenset[int]], Awaitable[None]]
MIN_TICK_GAP = 0.05  # seconds between two rounds woken by the watch, at least
EXPIRY_MARGIN = 0.05  # seconds after a Lease's expiry that the round looks at it


class Share(Protocol):
    """Where the ring's decisions take effect: the replica's informers and controllers."""

    def filtering(self, server_side: bool) -> None:
        """Whether the API server filters by shard (learned once, at joining)."""

    def activate(self, buckets: frozenset[int]) -> None:
        """Reconcile exactly `buckets` (more than before: every one published)."""

    async def release(self, buckets: frozenset[int]) -> None:
        """Stop reconciling `buckets` now; return once their reconciles in flight ended."""

    def lose(self) -> None:
        """Stop reconciling anything: the ring can no longer vouch for this replica."""


class LocalShare:
    """A `Share` on the ring's own event loop: the replica's `ObjectShare`
    (kube/object_share.py), which its informers follow, and `drain`, which
    waits for the released objects' reconciles in flight."""

    def __init__(self, share: ObjectShare, drain: Drain) -> None:
        self.share = share
        self.drain = drain

    def filtering(self, server_side: bool) -> None:
        self.share.server_side = server_side

    def activate(self, buckets: frozenset[int]) -> None:
        self.share.set_active(buckets)

    async def release(self, buckets: frozenset[int]) -> None:
        self.share.set_active(self.share.active - buckets)
        await self.drain(buckets)

    def lose(self) -> None:
        self.share.set_active(())


def replica_identity() -> str:
    """POD_NAME (the manifests set it from the Downward API), else host and pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def lease_name(ring: str, identity: str) -> str:
    name = re.sub(r"[^a-z0-9.-]+", "-", f"{ring}-{identity}".lower()).strip("-.")
    return name[:253]


@dataclass(frozen=True)
class Member:
    identity: str
    lease: str
    held: frozenset[int]


class RingLost(Exception):
    """This replica can no longer vouch for its Lease: it must stop reconciling."""


class ShardRing:
    def __init__(
        self,
        api: Api,
        share: Share,
        *,
        ring: str,
        namespace: str,
        metrics: Metrics,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        identity: str | None = None,
    ) -> None:
        self.api = api
        self.share = share
        self.active: frozenset[int] = frozenset()  # what `share` reconciles, once it has heard
        self.server_side = False
        self.ring = ring
        self.namespace = namespace
        self.metrics = metrics
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.identity = identity or replica_identity()
        self.lease = lease_name(ring, self.identity)
        self.lost = asyncio.Event()
        self.members: list[Member] = []
        self._held: frozenset[int] = frozenset()  # as published in our Lease
        self._draining: dict[frozenset[int], asyncio.Task[None]] = {}
        self._version = ""  # our Lease's resourceVersion, for optimistic writes
        self._renewed_at = 0.0  # set when the Lease is created
        self._observed: dict[str, tuple[str, float]] = {}  # lease -> (version, seen changing)
        self._reported: set[str] = set()
        self._runner: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # another member's Lease moved: a round now
        self._seen_held: dict[str, str] = {}  # lease -> its held annotation, as watched

    # ----- joining and leaving --------------------------------------------------
    async def join(self) -> None:
        """Create (or take back) our Lease holding nothing, learn whether the API
        server filters by shard, and take a first share."""
        await self._create_lease()
        self.server_side = await self._server_filters()
        self.share.filtering(self.server_side)
        self.metrics.shard_server_side.labels(self.ring).set(1 if self.server_side else 0)
        log.info(
            "shard ring joined ring=%s identity=%s lease=%s/%s filtering=%s",
            self.ring,
            self.identity,
            self.namespace,
            self.lease,
            "server" if self.server_side else "client",
        )
        if not self.server_side:
            log.info(
                "the API server does not filter by shard (feature gate ShardedListAndWatch off, "
                "or Kubernetes before 1.36): this replica watches every object and keeps its share"
            )
        await self._tick()

    def start(self) -> None:
        self._runner = asyncio.create_task(self._run(), name=f"shard-ring {self.ring}")
        self._watcher = asyncio.create_task(
            self._watch_leases(), name=f"shard-ring {self.ring} leases"
        )

    async def leave(self) -> None:
        """After this replica's reconciles have stopped: hand every bucket over at once."""
        for task in (self._runner, self._watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for task in self._draining.values():
            task.cancel()
        self._activate(frozenset())
        if self.lost.is_set():
            return  # not ours to delete any more: it expires
        try:
            await self.api.delete(LEASES, self.lease, self.namespace)
            log.info("shard ring left ring=%s lease=%s/%s", self.ring, self.namespace, self.lease)
        except ApiError as error:
            if error.status != 404:
                log.warning("could not delete the ring Lease lease=%s error=%s", self.lease, error)

    # ----- the loop ---------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await self._until_next_round()
            try:
                await asyncio.wait_for(self._tick(), timeout=self.renew_deadline)
            except asyncio.CancelledError:
                raise
            except RingLost as lost:
                self._lose(str(lost))
                return
            except Exception as error:  # any failure is retried until the deadline
                log.warning("shard ring renewal failed ring=%s error=%s", self.ring, error)
            if _now() - self._renewed_at > self.renew_deadline:
                self._lose(f"Lease not renewed for {self.renew_deadline:g}s")
                return

    async def _until_next_round(self) -> None:
        """A retry period, or less: until another member's Lease moves (the
        watch wakes us) or the next one is due to expire."""
        started = _now()
        wait = self.retry_period
        expiries = [
            seen + self.lease_duration
            for name, (_, seen) in self._observed.items()
            if name != self.lease and seen + self.lease_duration > started
        ]
        if expiries:
            wait = min(wait, min(expiries) - started + EXPIRY_MARGIN)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=max(wait, 0.0))
        self._wake.clear()
        rest = MIN_TICK_GAP - (_now() - started)
        if rest > 0:
            await asyncio.sleep(rest)

    async def _watch_leases(self) -> None:
        """The ring's Leases as they change: each change of another member's
        timed as it happens, and a round woken when one comes, goes or holds
        other buckets. A failed watch is started again (the rounds go on
        every retry period meanwhile)."""
        backoff = 0.5
        while True:
            try:
                async for event in self.api.watch(
                    LEASES,
                    self.namespace,
                    label_selector=f"{RING_LABEL}={self.ring}",
                    timeout_seconds=300,
                ):
                    self._saw(event)
                    backoff = 0.5
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.debug("ring Lease watch failed ring=%s error=%s", self.ring, error)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    def _saw(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        metadata = (event.get("object") or {}).get("metadata") or {}
        name = str(metadata.get("name") or "")
        if kind not in ("ADDED", "MODIFIED", "DELETED") or not name or name == self.lease:
            return
        if kind == "DELETED":
            self._observed.pop(name, None)
            self._seen_held.pop(name, None)
            self._wake.set()
            return
        version = str(metadata.get("resourceVersion") or "")
        previous = self._observed.get(name)
        if previous is None or previous[0] != version:
            self._observed[name] = (version, _now())
        held = str((metadata.get("annotations") or {}).get(HELD_ANNOTATION, ""))
        if self._seen_held.get(name) != held:
            self._seen_held[name] = held
            self._wake.set()

    def _lose(self, reason: str) -> None:
        log.error(
            "shard ring lost, stopping ring=%s lease=%s reason=%s", self.ring, self.lease, reason
        )
        self.active = frozenset()
        self.share.lose()
        self.lost.set()

    async def _tick(self) -> None:
        members = await self._read_members()
        assigned = assign(member.identity for member in members).get(self.identity, frozenset())
        others = _held_by_others(members, self.identity)
        releasing = self.active - assigned
        if releasing:
            self._release(releasing)
        draining = frozenset().union(*self._draining)
        # Held and published, but neither reconciled nor draining: a claim that lost.
        self._held = self.active | draining
        wanted = assigned - self._held - others
        if not wanted:
            await self._write(self._held)
            return
        await self._write(self._held | wanted)
        others = _held_by_others(await self._read_members(), self.identity)
        gained = wanted - others
        if gained != wanted:
            await self._write(self._held | gained)
        self._held |= gained
        if gained:
            self._activate(self.active | gained)
            self.metrics.shard_handovers.labels(self.ring, "gained").inc(len(gained))
            self._report_share(f"gained={format_buckets(gained)}")

    def _activate(self, buckets: frozenset[int]) -> None:
        self.active = buckets
        self.share.activate(buckets)
        self.metrics.shard_buckets_held.labels(self.ring).set(len(buckets))

    def _release(self, buckets: frozenset[int]) -> None:
        """Stop starting reconciles of `buckets` now; withdraw them from the Lease
        once their reconciles in flight have ended (`drain`)."""
        self.active -= buckets
        self.metrics.shard_buckets_held.labels(self.ring).set(len(self.active))
        self._report_share(f"releasing={format_buckets(buckets)}")

        async def drain() -> None:
            try:
                await self.share.release(buckets)
            finally:
                self._draining.pop(buckets, None)
                self.metrics.shard_handovers.labels(self.ring, "released").inc(len(buckets))
                self._wake.set()  # withdraw them from the Lease now: the next holder waits

        self._draining[buckets] = asyncio.create_task(drain(), name=f"shard-drain {buckets}")

    def _report_share(self, change: str) -> None:
        log.info(
            "shard share changed ring=%s %s holding=%s members=%d",
            self.ring,
            change,
            format_buckets(self.active) or "none",
            len(self.members),
        )

    # ----- the Leases ------------------------------------------------------------------
    async def _read_members(self) -> list[Member]:
        """The live members, ourselves included (a consistent read: no resourceVersion)."""
        listing = await self.api.list(
            LEASES, self.namespace, label_selector=f"{RING_LABEL}={self.ring}"
        )
        now = _now()
        leases = listing.get("items") or []
        members = [m for m in (self._member(lease, now) for lease in leases) if m is not None]
        listed = {(lease.get("metadata") or {}).get("name") for lease in leases}
        for gone in set(self._observed) - listed:
            del self._observed[gone]  # deleted: an expired one stays observed, and expired
        if self.lease not in listed:
            raise RingLost("our Lease is gone (deleted by someone else?)")
        self.members = members
        self.metrics.shard_members.labels(self.ring).set(len(members))
        return members

    def _member(self, lease: dict[str, Any], now: float) -> Member | None:
        metadata = lease.get("metadata") or {}
        name = str(metadata.get("name") or "")
        version = str(metadata.get("resourceVersion") or "")
        if name == self.lease:
            return Member(self.identity, name, self._held)
        previous = self._observed.get(name)
        if previous is None or previous[0] != version:
            self._observed[name] = (version, now)
        elif now - previous[1] > self.lease_duration:
            return None  # unchanged for a lease duration: expired
        spec = lease.get("spec") or {}
        identity = spec.get("holderIdentity") if isinstance(spec, dict) else None
        annotations = metadata.get("annotations") or {}
        try:
            if not isinstance(identity, str) or not identity:
                raise ValueError("spec.holderIdentity is not a name")
            key = annotations.get(KEY_ANNOTATION, "object.metadata.namespace")
            if key != SHARD_KEY:
                raise ValueError(
                    f"its buckets are of {key}, ours of {SHARD_KEY} (another version of "
                    "the operator: its buckets are free once it has left)"
                )
            held = parse_buckets(str(annotations.get(HELD_ANNOTATION, "")))
        except ValueError as error:
            if name not in self._reported:
                self._reported.add(name)
                log.warning(
                    "ring Lease taken as holding every bucket until it expires or is deleted "
                    "lease=%s/%s error=%s",
                    self.namespace,
                    name,
                    error,
                )
            return Member(f"malformed:{name}", name, EVERY_BUCKET)
        return Member(identity, name, held)

    def _body(self, held: frozenset[int]) -> dict[str, Any]:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        metadata: dict[str, Any] = {
            "name": self.lease,
            "namespace": self.namespace,
            "labels": {RING_LABEL: self.ring},
            "annotations": {
                HELD_ANNOTATION: format_buckets(held),
                BUCKETS_ANNOTATION: str(BUCKETS),
                KEY_ANNOTATION: SHARD_KEY,
            },
        }
        if self._version:
            metadata["resourceVersion"] = self._version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "renewTime": now,
            },
        }

    async def _create_lease(self) -> None:
        self._version = ""
        try:
            created = await self.api.create(LEASES, self._body(frozenset()), self.namespace)
        except ApiError as error:
            if error.status != 409:
                raise
            # Ours from a previous life of this replica (same POD_NAME): whatever it
            # held died with it; start again from nothing.
            current = await self.api.get(LEASES, self.lease, self.namespace)
            self._version = (current.get("metadata") or {}).get("resourceVersion") or ""
            created = await self.api.replace(
                LEASES, self.lease, self._body(frozenset()), self.namespace
            )
        self._version = (created.get("metadata") or {}).get("resourceVersion") or ""
        self._renewed_at = _now()

    async def _write(self, held: frozenset[int]) -> None:
        try:
            written = await self.api.replace(LEASES, self.lease, self._body(held), self.namespace)
        except ApiError as error:
            if error.status == 404:
                raise RingLost("our Lease is gone (deleted by someone else?)") from error
            if error.status == 409:
                # Someone else wrote our Lease: read it back, write ours over it next round.
                current = await self.api.get(LEASES, self.lease, self.namespace)
                self._version = (current.get("metadata") or {}).get("resourceVersion") or ""
            raise
        self._version = (written.get("metadata") or {}).get("resourceVersion") or ""
        self._renewed_at = _now()

    async def _server_filters(self) -> bool:
        """Whether the API server applies `shardSelector`: it echoes it in the
        list's `shardInfo` only then (an older server, or the gate off, ignores it)."""
        try:
            listing = await self.api.list(
                LEASES,
                self.namespace,
                label_selector=f"{RING_LABEL}={self.ring}",
                shard_selector=shard_selector(EVERY_BUCKET),
            )
        except ApiError as error:
            log.info("a sharded list was refused, filtering here error=%s", error)
            return False
        return bool((listing.get("metadata") or {}).get("shardInfo"))


def _now() -> float:
    """The ring's clock: its event loop's (monotonic; a test's fake clock)."""
    return asyncio.get_running_loop().time()


def _held_by_others(members: list[Member], identity: str) -> frozenset[int]:
    return frozenset().union(*(m.held for m in members if m.identity != identity))
