"""The informers an operator shares, and the reads they answer (controller-runtime's
pkg/cache).

One informer per kind and label selector, made and started on first use,
whoever asks: a watch's controller for its primary kind, the dependent-watch
registry for a kind a run wrote. Informers here only inform: they know nothing
of controllers, queues or owners; whoever wants the events adds a listener.

The proxy reads through `view`: only a synced informer without a label selector
(its store is then the whole kind) that holds the namespace asked about.
Read-your-writes lives in the informer (`Informer.remember`).

Every namespaced informer follows the one `NamespaceScope` (kube/namespace_scope.py):
the primary watches', the dependents', the proxy's alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.types import Resource

InformerKey = tuple[str, str, str, str | None]  # group, version, plural, label selector


def informer_name(resource: Resource) -> str:
    return f"{resource.group or 'core'}/{resource.version}/{resource.plural}"


class CachedKindView:
    """What the proxy reads: one informer's store, objects and list metadata."""

    def __init__(self, informer: Informer) -> None:
        self._informer = informer

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
    def __init__(self, api: ApiClient, namespaces: Sequence[str] | NamespaceScope = ()) -> None:
        """`namespaces`: a scope, or the names of a fixed one (empty: every namespace)."""
        self.api = api
        self.scope = (
            namespaces if isinstance(namespaces, NamespaceScope) else NamespaceScope(namespaces)
        )
        self._informers: dict[InformerKey, Informer] = {}

    def informer(self, resource: Resource, *, label_selector: str | None = None) -> Informer:
        """The informer of `resource` (objects matching `label_selector`), started
        now if it is new. Listeners added to it hear every object it holds."""
        key = (resource.group, resource.version, resource.plural, label_selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.api,
                resource,
                scope=self.scope,
                label_selector=label_selector,
                name=informer_name(resource),
            )
            self._informers[key] = informer
            informer.begin()
        return informer

    def has(self, resource: Resource) -> bool:
        """Whether the whole kind (no label selector) has an informer already."""
        return (resource.group, resource.version, resource.plural, None) in self._informers

    def view(self, resource: Resource, namespace: str | None) -> CachedKindView | None:
        """Reads of `resource` in `namespace` (None: every namespace), if an
        informer already holds all of them. Never starts one: reading a kind is
        no reason to watch it (the reference's memory leak)."""
        informer = self._informers.get((resource.group, resource.version, resource.plural, None))
        if informer is None or not informer.synced or not informer.covers(namespace):
            return None
        return CachedKindView(informer)

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

    async def wait_synced(self) -> None:
        for informer in list(self._informers.values()):
            await informer.wait_synced()

    async def stop(self) -> None:
        await asyncio.gather(
            *(informer.stop() for informer in self._informers.values()), return_exceptions=True
        )
