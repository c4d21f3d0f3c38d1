"""The dependent-watch registry: which kinds each watch's runs wrote.

The first time a run writes a kind through the proxy (`on_write`), and the
owner's watch allows it (blacklist.py), that kind gets a listener on its
informer from the shared cache (kube/cache.py: started then, or the one that
already runs). One listener per kind serves every watch following it: its
events go to the owners they point to (handlers.py) and into the owners'
controllers' queues.

Reads never start a watch: the proxy answers from an informer that already
exists, or forwards to the server. That is the reference's memory leak fixed.

A run's own write is no reason to run again: the proxy hands over the object
each write returned, and the change event that carries that very version
(same object, same resourceVersion) does not re-queue the owner whose run
wrote it. Any later change (another writer, a controller, a drift) has
another version and does. The reference runs every owner a second time,
with nothing to do, after each run that changed something.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.controller.blacklist import blacklisted, gets_dependent_watch
from ansible_operator.controller.handlers import OwnerKind, requests_for_owners
from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.informer import EventListener
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.watches import Watch

log = logging.getLogger("ansible_operator.controller")

Enqueue = Callable[[ObjectKey], None]
KindKey = tuple[str, str, str]  # group, version, plural
# Writes whose change event has not come yet (it comes within moments; the
# oldest are forgotten first, and an event for a forgotten write re-queues).
OWN_WRITES_KEPT = 10_000
# Seconds a dependent's change waits before it re-queues its owner: time for
# the proxy to hand over the write that may have caused it.
OWN_WRITE_WAIT = 0.2


@dataclass(frozen=True)
class _OwningWatch:
    watch: Watch
    kind: OwnerKind
    enqueue: Enqueue


def _version_of(
    key: KindKey, obj: Mapping[str, Any] | None
) -> tuple[KindKey, str, str, str] | None:
    """One version of one object: its kind, namespace, name and resourceVersion."""
    metadata = (obj or {}).get("metadata") or {}
    if not metadata.get("name") or not metadata.get("resourceVersion"):
        return None
    return (
        key,
        metadata.get("namespace") or "",
        metadata["name"],
        str(metadata["resourceVersion"]),
    )


class DependentWatches:
    def __init__(self, cache: InformerCache, own_write_wait: float = OWN_WRITE_WAIT) -> None:
        self.cache = cache
        self.own_write_wait = own_write_wait
        self._watches: dict[tuple[str, str], _OwningWatch] = {}  # by the owner's group, kind
        # dependent kind -> the owner kinds following it, and their queues
        self._following: dict[KindKey, dict[OwnerKind, Enqueue]] = {}
        # (kind, namespace, name, resourceVersion) a run wrote -> that run's owner
        self._own_writes: OrderedDict[tuple[KindKey, str, str, str], tuple] = OrderedDict()

    def add_owner(self, watch: Watch, enqueue: Enqueue, *, namespaced: bool) -> None:
        """A watch whose runs' writes may start dependent watches; `enqueue`
        takes the keys of its objects to reconcile; `namespaced`: whether its kind is."""
        kind = OwnerKind(
            watch.gvk.group,
            watch.gvk.kind,
            namespaced=namespaced,
            follow_status=watch.watch_dependent_status,
        )
        self._watches[(watch.gvk.group, watch.gvk.kind)] = _OwningWatch(watch, kind, enqueue)

    def on_write(
        self, resource: Resource, owner: Owner, written: Mapping[str, Any] | None = None
    ) -> None:
        """The proxy's write hook: a run of `owner` wrote an object of `resource`
        (`written`: the object as the write returned it)."""
        owning = self._watches.get((owner.group, owner.kind))
        if owning is None or not gets_dependent_watch(owning.watch, resource):
            return
        key = (resource.group, resource.version, resource.plural)
        self._remember_own_write(key, owner, written)
        following = self._following.get(key)
        if following is not None:
            if owning.kind not in following:
                following[owning.kind] = owning.enqueue
                self._say_watching(resource, owner)
            return
        self._following[key] = {owning.kind: owning.enqueue}
        self._say_watching(resource, owner)
        self.cache.informer(resource).add_listener(self._listener(key))

    def reads_cached(self, resource: Resource, owner: Owner) -> bool:
        """Whether a run of `owner` may read `resource` from the cache: not
        when its watch blacklists the kind (the reference reads those from the server)."""
        owning = self._watches.get((owner.group, owner.kind))
        return owning is None or not blacklisted(owning.watch, resource)

    def _remember_own_write(
        self, key: KindKey, owner: Owner, written: Mapping[str, Any] | None
    ) -> None:
        found = _version_of(key, written)
        if found is None:
            return
        self._own_writes[found] = (owner.group, owner.kind, ObjectKey(owner.namespace, owner.name))
        self._own_writes.move_to_end(found)
        while len(self._own_writes) > OWN_WRITES_KEPT:
            self._own_writes.popitem(last=False)

    def _written_by(self, key: KindKey, event: str, new: Mapping[str, Any] | None) -> tuple | None:
        """The owner whose run wrote this very version, if this event is its write."""
        found = _version_of(key, new) if event == "MODIFIED" else None
        return None if found is None else self._own_writes.pop(found, None)

    def _listener(self, key: KindKey) -> EventListener:
        def on_event(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            requests = requests_for_owners(event, old, new, list(self._following[key]))
            if not requests:
                return
            if event != "MODIFIED":
                self._deliver(key, event, new, requests)
                return
            # The API server sends the write's answer and its change event at
            # once; the proxy may hand over the answer a moment after the event.
            asyncio.get_running_loop().call_later(
                self.own_write_wait, self._deliver, key, event, new, requests
            )

        return on_event

    def _deliver(
        self,
        key: KindKey,
        event: str,
        new: Mapping[str, Any] | None,
        requests: list[tuple[OwnerKind, ObjectKey]],
    ) -> None:
        following = self._following[key]
        writer = self._written_by(key, event, new)
        for kind, owner_key in requests:
            if writer == (kind.group, kind.kind, owner_key):
                continue  # its own run's write
            following[kind](owner_key)

    @staticmethod
    def _say_watching(resource: Resource, owner: Owner) -> None:
        log.info(
            "watching dependents kind=%s group=%s version=%s owner_kind=%s",
            resource.kind,
            resource.group,
            resource.version,
            owner.kind,
        )
