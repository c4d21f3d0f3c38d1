"""A replica's share of the objects, as its informers see it: the objects
whose bucket (kube/shard_keys.py) it reconciles now. The shard ring
(sharding/ring.py) moves buckets in and out (`set_active`); the informers
(kube/informer.py) listen, and keep only what `holds` says is theirs.

Two ways an object is in the share, chosen per informer (`Follows`):

- "self", the watches' own kinds: its uid's bucket is active. Where the API
  server filters (Kubernetes 1.36+, gate `ShardedListAndWatch`), its lists and
  watches carry `shard_selector()`; elsewhere every object comes and those of
  other buckets are dropped before they are stored (`Informer.dropped`).
- "owner", the dependents' kinds: the bucket in its `OWNER_SHARD_LABEL` label
  (its owner's, stamped by the proxy) is active. Their lists and watches carry
  `owner_selector()`, a label selector every API server applies: each replica
  is sent, and holds, only its owners' dependents, gate or no gate.

A share that grows is relisted (which objects it brings, nobody knows); one
that shrinks is forgotten without a DELETED (another replica has them now).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ansible_operator.kube.shard_keys import (
    BUCKETS,
    Follows,
    object_bucket,
    owner_bucket,
    owner_shard_selector,
    shard_selector,
)

log = logging.getLogger("ansible_operator.sharding")


class ShareListener(Protocol):
    def share_changed(self, gained: frozenset[int], lost: frozenset[int]) -> None: ...


class ObjectShare:
    def __init__(self, active: Iterable[int] = ()) -> None:
        self._active = frozenset(active)
        self.server_side = False  # whether the API server applies `shard_selector()`
        self._listeners: list[ShareListener] = []

    @property
    def active(self) -> frozenset[int]:
        """The buckets whose objects this replica reconciles now."""
        return self._active

    @staticmethod
    def bucket(obj: Mapping[str, Any] | None, follows: Follows = "self") -> int | None:
        """`obj`'s bucket: its uid's, or its owner's as labelled (None: no label)."""
        return object_bucket(obj) if follows == "self" else owner_bucket(obj)

    def holds(self, obj: Mapping[str, Any] | None, follows: Follows = "self") -> bool:
        """Whether `obj` is this replica's: its uid's bucket, or its owner's as labelled."""
        return self.holds_bucket(self.bucket(obj, follows))

    def holds_bucket(self, bucket: int | None) -> bool:
        return bucket is not None and bucket in self._active

    def shard_selector(self) -> str | None:
        """The `shardSelector` of a list or watch of objects keyed by themselves
        (None: the server ignores it, or the share is the whole space)."""
        if not self.server_side or len(self._active) == BUCKETS:
            return None
        return shard_selector(self._active)

    def owner_selector(self) -> str:
        """The label selector of the dependents of this share's owners."""
        return owner_shard_selector(self._active)

    # ----- the share moves ---------------------------------------------------------
    def set_active(self, buckets: Iterable[int]) -> None:
        new = frozenset(buckets)
        lost, gained = self._active - new, new - self._active
        if not lost and not gained:
            return
        self._active = new
        for listener in list(self._listeners):
            try:
                listener.share_changed(gained, lost)
            except Exception:
                log.exception("share listener failed")

    def add_listener(self, listener: ShareListener) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_listener(self, listener: ShareListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
