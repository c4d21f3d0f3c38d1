"""Dependent watches and the read cache behind the proxy.

The first time a run writes a kind (through the proxy), the owner's watch
gets an informer on that kind (in the watched namespaces; cluster-scoped kinds
only with watchClusterScopedResources; never a blacklisted kind). Its events
map back to owners by controller ownerReference or by the owner annotations:
creates are ignored, deletes trigger, updates trigger unless only status or
bookkeeping changed (status too with watchDependentStatus).

Reads never start a watch: the proxy answers from an informer that already
exists, or forwards to the server. That is the reference's memory leak fixed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.controller.predicates import dependent_update_matters
from ansible_operator.controller.reconciler import ObjectKey, WatchController
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.proxy.ownership import owner_key_from

log = logging.getLogger("ansible_operator.controller")

ResourceKey = tuple[str, str, str]  # group, version, plural


def resource_key(resource: Resource) -> ResourceKey:
    return (resource.group, resource.version, resource.plural)


@dataclass
class SharedInformer:
    """One informer and whoever listens to it."""

    informer: Informer
    resource: Resource
    namespaces: tuple[str, ...] | None  # None: all namespaces
    filtered: bool  # started with a label selector: its store is not the whole kind
    listeners: list[Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]] = field(
        default_factory=list
    )

    def dispatch(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for listener in self.listeners:
            listener(kind, old, new)

    def covers(self, namespace: str | None) -> bool:
        if self.namespaces is None:
            return True
        return namespace is not None and namespace in self.namespaces


class CachedKindView:
    """What the proxy reads: one informer's store, scoped to what it covers."""

    def __init__(self, shared: SharedInformer) -> None:
        self._shared = shared

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._shared.informer.get(namespace, name)

    def list(
        self, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> list[dict[str, Any]]:
        return self._shared.informer.list(
            namespace, label_selector=label_selector, field_selector=field_selector
        )

    @property
    def resource_version(self) -> str:
        return self._shared.informer.resource_version

    def remember(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        self._shared.informer.remember(obj, deleted=deleted)


class InformerHub:
    def __init__(self, api: ApiClient, namespaces: list[str]) -> None:
        self.api = api
        self.namespaces = tuple(namespaces) or None
        self._unfiltered: dict[ResourceKey, SharedInformer] = {}
        self._all: list[SharedInformer] = []
        self._controllers: dict[tuple[str, str], WatchController] = {}
        self._dependent_listeners: dict[ResourceKey, set[tuple[str, str]]] = {}
        self._starting: dict[ResourceKey, asyncio.Task[None]] = {}

    # ----- primaries ----------------------------------------------------------
    async def add_primary(self, controller: WatchController) -> Informer:
        watch = controller.watch
        resource = controller.resource
        self._controllers[(watch.gvk.group, watch.gvk.kind)] = controller
        selector = watch.selector.to_query() if watch.selector else None
        shared = self._new_shared(resource, selector)
        shared.listeners.append(controller.on_event)
        if selector is None:
            existing = self._unfiltered.get(resource_key(resource))
            if existing is None:
                self._unfiltered[resource_key(resource)] = shared
        await shared.informer.start()
        return shared.informer

    def _new_shared(self, resource: Resource, selector: str | None) -> SharedInformer:
        namespaces = self.namespaces if resource.namespaced else None
        holder: dict[str, SharedInformer] = {}
        informer = Informer(
            self.api,
            resource,
            namespaces=list(namespaces) if namespaces else None,
            label_selector=selector,
            on_event=lambda kind, old, new: holder["shared"].dispatch(kind, old, new),
            name=f"{resource.group or 'core'}/{resource.version}/{resource.plural}",
        )
        shared = SharedInformer(informer, resource, namespaces, selector is not None)
        holder["shared"] = shared
        self._all.append(shared)
        return shared

    async def wait_synced(self) -> None:
        for shared in list(self._all):
            await shared.informer.wait_synced()

    async def stop(self) -> None:
        for task in self._starting.values():
            task.cancel()
        await asyncio.gather(
            *(shared.informer.stop() for shared in self._all), return_exceptions=True
        )

    # ----- dependents -----------------------------------------------------------
    def ensure_dependent_watch(self, resource: Resource, owner: Owner) -> None:
        """Called by the proxy after a run wrote `resource` for `owner`."""
        controller = self._controllers.get((owner.group, owner.kind))
        if controller is None:
            return
        watch = controller.watch
        if not watch.watch_dependent_resources:
            return
        if self._blacklisted(resource, owner):
            return
        if not resource.namespaced and not watch.watch_cluster_scoped_resources:
            return
        key = resource_key(resource)
        owners = self._dependent_listeners.setdefault(key, set())
        if (owner.group, owner.kind) in owners:
            return
        owners.add((owner.group, owner.kind))
        shared = self._unfiltered.get(key)
        if shared is not None:
            if len(owners) == 1:
                shared.listeners.append(self._dependent_listener(key))
            return
        shared = self._new_shared(resource, None)
        self._unfiltered[key] = shared
        shared.listeners.append(self._dependent_listener(key))
        log.info(
            "watching dependents kind=%s group=%s version=%s owner_kind=%s",
            resource.kind,
            resource.group,
            resource.version,
            owner.kind,
        )
        self._starting[key] = asyncio.get_running_loop().create_task(shared.informer.start())

    def _dependent_listener(
        self, key: ResourceKey
    ) -> Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]:
        def on_event(kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            if kind == "ADDED":
                return  # creates are the run's own doing (or a relist): ignored
            obj = new if new is not None else old
            if obj is None:
                return
            for group, owner_kind in self._dependent_listeners.get(key, ()):
                controller = self._controllers[(group, owner_kind)]
                owner = owner_key_from(
                    obj, group, owner_kind, owner_namespaced=controller.resource.namespaced
                )
                if owner is None:
                    continue
                if (
                    kind == "MODIFIED"
                    and new is not None
                    and not dependent_update_matters(
                        old, new, follow_status=controller.watch.watch_dependent_status
                    )
                ):
                    continue
                controller.enqueue(ObjectKey(*owner))

        return on_event

    def _blacklisted(self, resource: Resource, owner: Owner) -> bool:
        controller = self._controllers.get((owner.group, owner.kind))
        if controller is None:
            return False
        return any(
            b.group == resource.group and b.version == resource.version and b.kind == resource.kind
            for b in controller.watch.blacklist
        )

    # ----- the proxy's cache ------------------------------------------------------
    def lookup(
        self, resource: Resource, namespace: str | None, owner: Owner | None = None
    ) -> CachedKindView | None:
        if owner is not None and self._blacklisted(resource, owner):
            return None
        shared = self._unfiltered.get(resource_key(resource))
        if shared is None or not shared.informer.synced or not shared.covers(namespace):
            return None
        return CachedKindView(shared)
