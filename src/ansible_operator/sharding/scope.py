"""A replica's share as a namespace scope: the namespaces of its base scope
(every one, WATCH_NAMESPACE's list, or those a selector picks) whose bucket
it reconciles now (sharding/ring.py moves buckets in and out).

The informers and controllers already follow a scope: a namespace that leaves
is forgotten with no event (its objects were not deleted: another replica
reconciles them now), and so is every namespace of a bucket that leaves. A
bucket that arrives is one the informers cannot list namespace by namespace
(nobody knows which namespaces hash there), so they are told the share grew
and relist across the cluster: with `shard_selector` when the API server
filters, else everything, filtered here with the same hash. When it shrinks,
a watch the server filters is restarted with the smaller selector.

Cluster-scoped kinds are not namespaced and are watched whole by every
replica; their objects all hash as "" and belong to one replica, which the
controllers check before each reconcile (`owns`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.sharding.buckets import BUCKETS, bucket_of, format_buckets, shard_selector

log = logging.getLogger("ansible_operator.sharding")


class ShardedScope(NamespaceScope):
    def __init__(self, base: NamespaceScope) -> None:
        super().__init__()
        self._every = False
        self.base = base
        self.server_side = False  # whether the API server applies `shard_selector()`
        self._active: frozenset[int] = frozenset()
        self._seen: set[str] = set()  # namespaces of objects let in: what a loss forgets
        base.add_listener(self)

    @property
    def dynamic(self) -> bool:
        return True

    @property
    def active(self) -> frozenset[int]:
        """The buckets whose objects this replica reconciles now."""
        return self._active

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset(ns for ns in self.base.namespaces if bucket_of(ns) in self._active)

    def owns(self, namespace: str | None) -> bool:
        """Whether an object of `namespace` ("" or None: cluster-scoped) is this replica's."""
        return bucket_of(namespace) in self._active

    def contains(self, namespace: str | None) -> bool:
        if not namespace:
            return True  # a cluster-scoped kind is watched whole; see `owns`
        if not self.base.contains(namespace) or bucket_of(namespace) not in self._active:
            return False
        self._seen.add(namespace)
        return True

    def shard_selector(self) -> str | None:
        """What a cluster-wide list or watch sends (None: the server ignores it,
        or the share is the whole space)."""
        if not self.server_side or len(self._active) == BUCKETS:
            return None
        return shard_selector(self._active)

    def describe(self) -> str:
        return f"{self.base.describe()} in buckets {format_buckets(self._active) or 'none'}"

    # ----- the share moves -----------------------------------------------------
    def set_active(self, buckets: Iterable[int]) -> None:
        new = frozenset(buckets)
        lost, gained = self._active - new, new - self._active
        if not lost and not gained:
            return
        self._active = new
        for namespace in sorted(ns for ns in self._seen if bucket_of(ns) in lost):
            self._seen.discard(namespace)
            for listener in list(self._listeners):
                self._tell(listener.namespace_left, namespace)
        entering = sorted(ns for ns in self.base.namespaces if bucket_of(ns) in gained)
        for listener in list(self._listeners):
            share_changed = getattr(listener, "share_changed", None)
            try:
                if share_changed is not None:
                    share_changed(entering, gained)
                else:
                    for namespace in entering:
                        listener.namespace_entered(namespace)
            except Exception:
                log.exception("share listener failed")

    # ----- the base scope's changes (a namespace labelled in or out) -----------
    def namespace_entered(self, namespace: str) -> None:
        if bucket_of(namespace) in self._active:
            for listener in list(self._listeners):
                self._tell(listener.namespace_entered, namespace)

    def namespace_left(self, namespace: str) -> None:
        if bucket_of(namespace) in self._active:
            self._seen.discard(namespace)
            for listener in list(self._listeners):
                self._tell(listener.namespace_left, namespace)

    # ----- lifecycle: the base's --------------------------------------------------
    async def start(self) -> None:
        await self.base.start()

    async def wait_synced(self) -> None:
        await self.base.wait_synced()

    async def stop(self) -> None:
        await self.base.stop()
