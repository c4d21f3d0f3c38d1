"""The informers an operator shares, and the reads they answer (controller-runtime's
pkg/cache).

One informer per kind and label selector, made and started on first use,
whoever asks: a watch's controller for its primary kind, the dependent-watch
registry for a kind a run wrote. Informers here only inform: they know nothing
of controllers, queues or owners; whoever wants the events adds a listener.

The proxy reads through `view`: only a synced informer without a label selector
(its store is then the whole kind) that holds the namespace asked about, or,
in a replica of a shard ring, one that holds the replica's share of the kind
(`CachedKindView.complete` False: a GET it holds is answered, the rest is
forwarded). Read-your-writes lives in the informer (`Informer.remember`).

Every namespaced informer follows the one `NamespaceScope` (kube/namespace_scope.py):
the primary watches', the dependents', the proxy's alike. In a shard ring,
every informer also follows the replica's `ObjectShare` (kube/object_share.py):
a watch's kind by its objects' uids, a dependents' kind by their owners'
label (`follows`), so one kind may have an informer of each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ansible_operator.kube.api import Api
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.kube.shard_keys import Follows
from ansible_operator.kube.types import Resource

# group, version, plural, label selector, what a share's informer follows (None: no share)
InformerKey = tuple[str, str, str, str | None, Follows | None]


def informer_name(resource: Resource) -> str:
    return f"{resource.group or 'core'}/{resource.version}/{resource.plural}"


class CachedKindView:
    """What the proxy reads: one informer's store, objects and list metadata."""

    def __init__(self, informer: Informer, *, complete: bool = True) -> None:
        self._informer = informer
        # False: a share's store, which holds some objects of each namespace:
        # what it does not hold may exist, and a list of it is not the kind's.
        self.complete = complete

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._informer.get(namespace, name)

    async def list(
        self, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> list[dict[str, Any]]:
        return await self._informer.list_yielding(
            namespace, label_selector=label_selector, field_selector=field_selector
        )

    @property
    def resource_version(self) -> str:
        return self._informer.resource_version

    def remember(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        self._informer.remember(obj, deleted=deleted)


class InformerCache:
    def __init__(
        self,
        api: Api,
        namespaces: Sequence[str] | NamespaceScope = (),
        *,
        share: ObjectShare | None = None,
    ) -> None:
        """`namespaces`: a scope, or the names of a fixed one (empty: every
        namespace); `share`: a shard ring's replica's, which every informer keeps to."""
        self.api = api
        self.scope = (
            namespaces if isinstance(namespaces, NamespaceScope) else NamespaceScope(namespaces)
        )
        self.share = share
        self._informers: dict[InformerKey, Informer] = {}

    def informer(
        self, resource: Resource, *, label_selector: str | None = None, follows: Follows = "self"
    ) -> Informer:
        """The informer of `resource` (objects matching `label_selector`), started
        now if it is new. Listeners added to it hear every object it holds. In
        a shard ring it holds the share's objects, keyed as `follows` says: by
        their uid (a watch's kind) or their owner's label (a dependents' kind)."""
        shared = follows if self.share is not None else None
        key = (resource.group, resource.version, resource.plural, label_selector, shared)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.api,
                resource,
                scope=self.scope,
                label_selector=label_selector,
                name=informer_name(resource),
                share=self.share,
                follows=follows,
            )
            self._informers[key] = informer
            informer.begin()
        return informer

    def _whole_kind(self, resource: Resource) -> list[Informer]:
        """The informers of the whole kind (no label selector): in a shard ring,
        the one keyed by uid first, then the one by owner."""
        kinds = ("self", "owner") if self.share is not None else (None,)
        found = (
            self._informers.get((resource.group, resource.version, resource.plural, None, kind))
            for kind in kinds
        )
        return [informer for informer in found if informer is not None]

    def has(self, resource: Resource) -> bool:
        """Whether the whole kind (no label selector) has an informer already."""
        return bool(self._whole_kind(resource))

    def view(self, resource: Resource, namespace: str | None) -> CachedKindView | None:
        """Reads of `resource` in `namespace` (None: every namespace), if an
        informer already holds all of them, or this replica's share of them
        (`complete` False). Never starts one: reading a kind is no reason to
        watch it (the reference's memory leak)."""
        for informer in self._whole_kind(resource):
            if not informer.synced:
                continue
            if informer.partial:
                return CachedKindView(informer, complete=False)
            if informer.covers(namespace):
                return CachedKindView(informer)
        return None

    def held(self) -> dict[str, tuple[int, int]]:
        """Objects and estimated bytes each informer holds, by informer name
        (informers of one kind under several label selectors add up)."""
        held: dict[str, tuple[int, int]] = {}
        for informer in list(self._informers.values()):
            objects, size = held.get(informer.name, (0, 0))
            held[informer.name] = (objects + informer.held_objects, size + informer.held_bytes)
        return held

    def received(self) -> dict[str, int]:
        """Objects the server sent each informer (lists and watch events, before
        any filtering here), by informer name: what a sharded watch saves."""
        received: dict[str, int] = {}
        for informer in list(self._informers.values()):
            received[informer.name] = received.get(informer.name, 0) + informer.received
        return received

    def dropped(self) -> dict[str, int]:
        """Of those, the objects of another replica's share, dropped before
        they were stored (a shard ring whose API server does not filter)."""
        dropped: dict[str, int] = {}
        for informer in list(self._informers.values()):
            if informer.share is not None:
                dropped[informer.name] = dropped.get(informer.name, 0) + informer.dropped
        return dropped

    async def wait_synced(self) -> None:
        for informer in list(self._informers.values()):
            await informer.wait_synced()

    async def stop(self) -> None:
        await asyncio.gather(
            *(informer.stop() for informer in self._informers.values()), return_exceptions=True
        )
