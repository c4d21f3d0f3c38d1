"""The dependent-watch registry: which kinds each watch's runs wrote.

The first time a run writes a kind through the proxy (`on_write`), and the
owner's watch allows it (blacklist.py), that kind gets a listener on its
informer from the shared cache (kube/cache.py: started then, or the one that
already runs). One listener per kind serves every watch following it: its
events go to the owners they point to (handlers.py) and into the owners'
controllers' queues.

Reads never start a watch: the proxy answers from an informer that already
exists, or forwards to the server. That is the reference's memory leak fixed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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


@dataclass(frozen=True)
class _OwningWatch:
    watch: Watch
    kind: OwnerKind
    enqueue: Enqueue


class DependentWatches:
    def __init__(self, cache: InformerCache) -> None:
        self.cache = cache
        self._watches: dict[tuple[str, str], _OwningWatch] = {}  # by the owner's group, kind
        # dependent kind -> the owner kinds following it, and their queues
        self._following: dict[KindKey, dict[OwnerKind, Enqueue]] = {}

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

    def on_write(self, resource: Resource, owner: Owner) -> None:
        """The proxy's write hook: a run of `owner` wrote an object of `resource`."""
        owning = self._watches.get((owner.group, owner.kind))
        if owning is None or not gets_dependent_watch(owning.watch, resource):
            return
        key = (resource.group, resource.version, resource.plural)
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

    def _listener(self, key: KindKey) -> EventListener:
        def on_event(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            following = self._following[key]
            for kind, owner_key in requests_for_owners(event, old, new, list(following)):
                following[kind](owner_key)

        return on_event

    @staticmethod
    def _say_watching(resource: Resource, owner: Owner) -> None:
        log.info(
            "watching dependents kind=%s group=%s version=%s owner_kind=%s",
            resource.kind,
            resource.group,
            resource.version,
            owner.kind,
        )
