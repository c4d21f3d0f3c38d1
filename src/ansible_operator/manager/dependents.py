"""The dependent-watch registry: which kinds each watch's runs wrote.

The first time a run writes a kind through the proxy (`record`, one `Write`
per write: proxy/writes.py), and the owner's watch allows it (blacklist.py),
that kind gets a listener on its informer from the shared cache
(kube/cache.py: started then, or the one that already runs). One listener
per kind serves every watch following it: its events go to the owners they
point to (handlers.py) and into the owners' controllers' queues.

Reads never start a watch: the proxy answers from an informer that already
exists, or forwards to the server. That is the reference's memory leak fixed.

In a shard ring, a dependent kind's informer holds the dependents of this
replica's owners only: those labelled with a bucket of its share (the proxy
labels what runs create with the owner's bucket, kube/shard_keys.py), so a
dependent's drift reaches the replica reconciling its owner, and each
replica holds about 1/N of the dependents.

A run's own write is no reason to run again. The proxy reports each write
before it sends it and settles it when the API server has answered, before
the run hears the answer. A change event that would re-queue an owner while
a write of that owner's run to that very object is in flight waits for the
write to settle (the event and the answer leave the API server together and
may arrive in either order); then the version the write produced (same
object, same resourceVersion) is the run's own and does not re-queue that
owner. Any other version (another writer, a controller, a drift) does, at
once. The reference runs every owner a second time, with nothing to do,
after each run that changed something.

A dependent kind the operator may not list or watch (its RBAC lacks them)
leaves the owners' runs successful but their dependents unwatched: drift
goes unseen. Until a kind's informer has listed, the registry remembers which
owners' runs wrote it; when the list or watch is refused (403), those owners
are queued again, and their reconcile reports it (`refused_watches`: a
`DependentsWatched` condition and a Warning Event naming the verb, the
resource, the namespace and the rule for config/rbac/role.yaml); once a list
succeeds, they are queued again and the condition turns True.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.controller.handlers import OwnerKind, requests_for_owners
from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.informer import EventListener, HealthListener, Informer
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.manager.blacklist import blacklisted, gets_dependent_watch
from ansible_operator.project.watches import Watch
from ansible_operator.proxy.writes import Write
from ansible_operator.runner.rbac_refusal import RbacRefusal, rbac_refusal

log = logging.getLogger("ansible_operator.controller")

Enqueue = Callable[[ObjectKey], None]
KindKey = tuple[str, str, str]  # group, version, plural
ObjectRef = tuple[KindKey, str, str]  # kind, namespace ("" if cluster-scoped), name
Version = tuple[KindKey, str, str, str]  # ... and resourceVersion
Writer = tuple[str, str, ObjectKey]  # the owner's group, kind, namespace and name
# Writes whose change event has not come yet (it comes within moments; the
# oldest are forgotten first, and an event for a forgotten write re-queues).
OWN_WRITES_KEPT = 10_000


@dataclass(frozen=True)
class _OwningWatch:
    watch: Watch
    kind: OwnerKind
    enqueue: Enqueue


@dataclass(eq=False)
class _InFlight:
    """A write sent and not yet answered, and the deliveries waiting for it."""

    writer: Writer
    waiting: list[Callable[[], None]] = field(default_factory=list)


def _kind_key(resource: Resource) -> KindKey:
    return (resource.group, resource.version, resource.plural)


def _writer_of(owner: Owner) -> Writer:
    return (owner.group, owner.kind, ObjectKey(owner.namespace, owner.name))


def _version_of(key: KindKey, obj: Mapping[str, Any] | None) -> Version | None:
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
    """The operator's `DependentRegistry` (proxy/writes.py)."""

    def __init__(self, cache: InformerCache) -> None:
        self.cache = cache
        self._watches: dict[tuple[str, str], _OwningWatch] = {}  # by the owner's group, kind
        # dependent kind -> the owner kinds following it, and their queues
        self._following: dict[KindKey, dict[OwnerKind, Enqueue]] = {}
        # a version a run wrote -> that run's owner, until its change event comes
        self._own_writes: OrderedDict[Version, Writer] = OrderedDict()
        self._in_flight: dict[ObjectRef, list[_InFlight]] = {}
        self._informers: dict[KindKey, Informer] = {}
        # The kinds whose list or watch RBAC refused, and what was refused.
        self._refused: dict[KindKey, RbacRefusal] = {}
        # Of each kind not listed yet (or refused): the owners whose runs wrote it.
        self._writers: dict[KindKey, set[Writer]] = {}

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

    def record(self, write: Write) -> None:
        """A run is about to send `write`: its object's events for that run's
        owner wait for its answer; once it succeeded, the kind is followed."""
        owner = write.owner
        owning = self._watches.get((owner.group, owner.kind))
        if owning is None or not gets_dependent_watch(owning.watch, write.resource):
            return
        flight: _InFlight | None = None
        ref: ObjectRef | None = None
        if write.name is not None:
            flight = _InFlight(_writer_of(owner))
            ref = (_kind_key(write.resource), write.namespace or "", write.name)
            self._in_flight.setdefault(ref, []).append(flight)
        write.when_settled(lambda settled: self._settle(settled, owning, ref, flight))

    def reads_cached(self, resource: Resource, owner: Owner) -> bool:
        """Whether a run of `owner` may read `resource` from the cache: not
        when its watch blacklists the kind (the reference reads those from the server)."""
        owning = self._watches.get((owner.group, owner.kind))
        return owning is None or not blacklisted(owning.watch, resource)

    def _settle(
        self,
        write: Write,
        owning: _OwningWatch,
        ref: ObjectRef | None,
        flight: _InFlight | None,
    ) -> None:
        if ref is not None and flight is not None:
            flights = self._in_flight[ref]
            flights.remove(flight)
            if not flights:
                del self._in_flight[ref]
        if write.happened:
            key = _kind_key(write.resource)
            self._remember_own_write(key, write)
            self._follow(key, owning, write)
            informer = self._informers.get(key)
            if key in self._refused or (informer is not None and not informer.synced):
                self._writers.setdefault(key, set()).add(_writer_of(write.owner))
        for deliver in flight.waiting if flight is not None else ():
            deliver()

    def _remember_own_write(self, key: KindKey, write: Write) -> None:
        found = _version_of(key, write.object)
        if found is None:
            return
        self._own_writes[found] = _writer_of(write.owner)
        self._own_writes.move_to_end(found)
        while len(self._own_writes) > OWN_WRITES_KEPT:
            self._own_writes.popitem(last=False)

    def _follow(self, key: KindKey, owning: _OwningWatch, write: Write) -> None:
        following = self._following.get(key)
        if following is not None:
            if owning.kind not in following:
                following[owning.kind] = owning.enqueue
                self._say_watching(write.resource, write.owner)
            return
        self._following[key] = {owning.kind: owning.enqueue}
        self._say_watching(write.resource, write.owner)
        # In a shard ring, the dependents of this replica's owners only (by the
        # owner's shard label the proxy stamps on what runs create).
        informer = self.cache.informer(write.resource, follows="owner")
        self._informers[key] = informer
        informer.add_listener(self._listener(key))
        informer.add_health_listener(self._health(key, write.resource))

    # ----- dependents the operator may not watch ------------------------------
    def refused_watches(self, owner: Owner) -> list[RbacRefusal]:
        """What RBAC refuses of the watches of the kinds `owner`'s runs wrote."""
        writer = _writer_of(owner)
        return [
            refusal
            for key, refusal in sorted(self._refused.items())
            if writer in self._writers.get(key, ())
        ]

    def _health(self, key: KindKey, resource: Resource) -> HealthListener:
        def on_health(error: ApiError | None) -> None:
            if error is None:
                if self._refused.pop(key, None) is not None:
                    log.info(
                        "dependents watched now kind=%s group=%s", resource.kind, resource.group
                    )
                    self._requeue_writers(key)
                informer = self._informers.get(key)
                if informer is not None and informer.synced:
                    self._writers.pop(key, None)
                return
            refusal = rbac_refusal(error.message) if error.status == 403 else None
            if refusal is None or self._refused.get(key) == refusal:
                return
            self._refused[key] = refusal
            log.warning(
                "dependents not watched kind=%s group=%s reason=%s",
                resource.kind,
                resource.group,
                refusal.describe(),
            )
            self._requeue_writers(key)

        return on_health

    def _requeue_writers(self, key: KindKey) -> None:
        """The owners whose runs wrote the kind reconcile again, to say what changed."""
        for group, kind, owner_key in sorted(self._writers.get(key, ())):
            owning = self._watches.get((group, kind))
            if owning is not None:
                owning.enqueue(owner_key)

    def _listener(self, key: KindKey) -> EventListener:
        def on_event(
            event: str, old: dict[str, Any] | None, new: dict[str, Any] | None, _listed: bool
        ) -> None:
            # A dependent's ADDED re-queues no one (handlers.py), listed or not; any
            # other event is a change, a relist's too (controller/priorities.py).
            if event != "MODIFIED":
                # A create's own version comes back as ADDED, which re-queues no one:
                # nothing would ever take it out of `_own_writes` but eviction.
                found = _version_of(key, new)
                if found is not None:
                    self._own_writes.pop(found, None)
            for kind, owner_key in requests_for_owners(event, old, new, list(self._following[key])):
                self._deliver(key, event, new, kind, owner_key)

        return on_event

    def _deliver(
        self,
        key: KindKey,
        event: str,
        new: Mapping[str, Any] | None,
        kind: OwnerKind,
        owner_key: ObjectKey,
    ) -> None:
        """Re-queue the owner, unless this event is its own run's write."""
        version = _version_of(key, new) if event == "MODIFIED" else None
        if version is not None:
            writer: Writer = (kind.group, kind.kind, owner_key)
            flight = self._flight(version[:3], writer)
            if flight is not None:
                flight.waiting.append(lambda: self._deliver(key, event, new, kind, owner_key))
                return
            if self._own_writes.get(version) == writer:
                del self._own_writes[version]
                return
        self._following[key][kind](owner_key)

    def _flight(self, ref: ObjectRef, writer: Writer) -> _InFlight | None:
        """A write of `writer`'s run to this object that has not been answered yet."""
        return next((f for f in self._in_flight.get(ref, []) if f.writer == writer), None)

    @staticmethod
    def _say_watching(resource: Resource, owner: Owner) -> None:
        log.info(
            "watching dependents kind=%s group=%s version=%s owner_kind=%s",
            resource.kind,
            resource.group,
            resource.version,
            owner.kind,
        )
