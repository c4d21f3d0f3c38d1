"""An informer: list, then watch from the list's resourceVersion, keeping an
in-memory store of one kind (in the namespaces of its `NamespaceScope`,
kube/namespace_scope.py) and telling its listeners what changed.

- A listener added late first hears ADDED for every object already held, as
  client-go's handlers do: whatever it builds from the events misses nothing.
- Each event says whether a list announced it (`listed`: a list or relist,
  a namespace entering, the replay to a late listener) or the watch did, as
  controller-runtime's `IsInInitialList`: what was there is not a change
  (controller/priorities.py queues it after the changes).
- Bookmarks keep the resourceVersion fresh, so a reconnect resumes where it
  left off instead of relisting.
- 410 Gone (the resourceVersion is too old): relist, and diff the fresh list
  against the store, so deletes missed while disconnected are still reported.
- Any other failure: reconnect with exponential backoff (capped), logged;
  the wait ends early when the kubeconfig changes.
- A changed kubeconfig (kube/config.py): relist, since the new server may be
  another cluster whose resourceVersions mean nothing here.
- The store keeps each object packed (kube/transform.py): listeners hear
  the objects as they arrive (and the previous one unpacked), and each `get`
  and `list` unpacks its own copy, answering as the server would.
- Memory held is counted as objects come and go (`held_objects`,
  `held_bytes`), so reporting it costs nothing per object.

How a scope of some namespaces is watched (issue 27: 600 namespaces took
10-20 minutes to start). Up to `CLUSTER_WIDE_ABOVE` namespaces: one list and
watch per namespace, as before. More, or a scope chosen by label: one list and
watch of the kind across the cluster, objects of other namespaces dropped as
they arrive (they never reach the store, the listeners or the proxy's reads).
A watch is an HTTP/1.1 connection held open, and the client's pool has 100:
with a watch per namespace, 100 namespaces' watches take the pool and the
remaining lists queue behind them for minutes. Measured against the local
API server (bench/watch_namespaces.py: ConfigMaps, one of ours per namespace,
~2,000 in the cluster; time to synced, requests made, Python memory held):

    namespaces   per namespace                cluster-wide, filtered
    10           0.14 s     20 req   2.8 MiB   0.24 s   4 req   0.3 MiB
    30           0.36 s     60 req   8.3 MiB   0.24 s   4 req   0.4 MiB
    100          1.19 s    200 req  27.6 MiB   0.34 s   4 req   0.5 MiB
    300          never (>120 s: 100 held)      0.16 s   3 req   0.9 MiB
    1000         never (>180 s: 100 held)      0.26 s   4 req   2.3 MiB

The pool is shared by every kind, so per-namespace watches of a few kinds
reach it at a few dozen namespaces: at 10, the two ways are alike.
The test operator (tests/operator, 4 kinds) with WATCH_NAMESPACE listing
1,000 namespaces: /readyz ok 9.5 s after the process started; with a watch
per namespace it had not started after 240 s (lists timing out for the pool).

A cluster-wide list the operator's RBAC refuses (403) falls back to a watch
per namespace, logged once per kind. Health listeners hear each failed list or
watch (the error) and each list that succeeds (None): the dependent watches
tell the owners when their dependents' kind may not be watched
(manager/dependents.py).

A namespace that enters the scope is listed and its objects dispatched as
ADDED; one that leaves is forgotten: its objects dropped from the store with
no event (a DELETED would run finalizers for objects nobody deleted).

With a share (kube/object_share.py, a replica of a shard ring), the store
holds only the share's objects: by their uid (`follows="self"`), their lists
and watches carrying the share's `shardSelector` where the API server filters,
else each object of another share dropped as it arrives, before it is stored
(counted in `dropped`); or by their owner's label (`follows="owner"`, the
dependents), with the share's label selector, which every server applies.
A store of a share is never the whole of a namespace (`covers` says no): the
proxy answers a GET from it when it holds the object, and forwards the rest.
When the share grows, every watch is restarted with a relist (the objects it
brings are not known); when it shrinks, the objects no longer held are
forgotten with no event (their forget listeners hear the keys) and a watch the
server filters is restarted with the smaller selector.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.kube.selectors import field_predicate, label_predicate
from ansible_operator.kube.shard_keys import Follows
from ansible_operator.kube.transform import Held, hold, resource_version
from ansible_operator.kube.types import Resource

log = logging.getLogger("ansible_operator.informer")

# (event, old, new, listed): `listed` when a list announced it (a relist, a namespace
# entering, the replay to a listener added late), not the watch.
EventListener = Callable[[str, dict[str, Any] | None, dict[str, Any] | None, bool], None]
StoreKey = tuple[str, str]  # namespace ("" when cluster-scoped), name
ForgetListener = Callable[[list[StoreKey]], None]
# Hears a failed list or watch (its error), and a list that succeeded (None).
HealthListener = Callable[[ApiError | None], None]

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
WATCH_TIMEOUT = (240, 480)  # seconds; spread so informers do not all reconnect together
# Above this many namespaces, one watch across the cluster filtered here
# rather than one watch per namespace (see the module's docstring).
CLUSTER_WIDE_ABOVE = 10
# Dispatching a large list yields to the event loop this often, so that probes,
# lease renewals and the proxy are answered while 10,000 objects are announced.
DISPATCH_BATCH = 250
EVERY_NAMESPACE = NamespaceScope()


def _unpacked(held: Held | None) -> dict[str, Any] | None:
    return None if held is None else held.unpack()


def _key(obj: dict[str, Any]) -> StoreKey:
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


_Written = tuple[int, Held | None]  # version, what was written (None: deleted)


class Informer:
    def __init__(
        self,
        api: Api,
        resource: Resource,
        *,
        namespaces: Iterable[str] | None = None,
        scope: NamespaceScope | None = None,
        label_selector: str | None = None,
        on_event: EventListener | None = None,
        name: str = "",
        share: ObjectShare | None = None,
        follows: Follows = "self",
    ) -> None:
        """`scope` (or `namespaces`, a fixed list; neither: every namespace)
        limits a namespaced kind; a cluster-scoped one is watched whole.
        `share` (a replica of a shard ring): only its objects are held, keyed
        as `follows` says (their uid, or their owner's label)."""
        self.api = api
        self.resource = resource
        self.share = share
        self.follows: Follows = follows
        if scope is None:
            scope = NamespaceScope(namespaces or ())
        self.scope = scope if resource.namespaced else EVERY_NAMESPACE
        # One watch across the cluster (its "namespace" is None), or one per namespace.
        many = len(self.scope.namespaces) > CLUSTER_WIDE_ABOVE
        self.cluster_wide = self.scope.every or self.scope.dynamic or many
        self.label_selector = label_selector
        self._listeners: list[EventListener] = [on_event] if on_event is not None else []
        self._forget_listeners: list[ForgetListener] = []
        self._health_listeners: list[HealthListener] = []
        self.name = name or f"{resource.group or 'core'}/{resource.version}/{resource.plural}"
        self._store: dict[StoreKey, Held] = {}
        self._held_bytes = 0
        # Read-your-writes: what runs wrote (or deleted: None) through the proxy,
        # until the watch catches up. Kept apart from the store, so the watch's
        # events still compare the true previous state with the new one.
        self._written: dict[StoreKey, _Written] = {}
        self._listed: set[str | None] = set()  # what the store holds (None: the whole scope)
        self._synced = asyncio.Event()
        self._started = False
        self._tasks: dict[str | None, asyncio.Task[None]] = {}  # by namespace (None: all)
        # Cluster-wide: namespaces entered, being listed; the keys deleted meanwhile.
        self._entering: dict[str, asyncio.Task[None]] = {}
        self._deleted_while_entering: dict[str, set[StoreKey]] = {}
        self.resource_version = ""
        self.relists = 0
        self.received = 0  # objects the server sent (lists and watch events), before filtering
        self.dropped = 0  # ... of which another share's, dropped before they were stored
        self._selectors_in_use: tuple[str | None, str | None] | None = None

    @property
    def namespaces(self) -> list[str | None]:
        """What is watched: [None] for the whole kind, else each namespace."""
        if self.cluster_wide:
            return [None]
        return sorted(self.scope.namespaces)

    # ----- lifecycle --------------------------------------------------------
    async def start(self) -> None:
        self.begin()

    def begin(self) -> None:
        """Start listing and watching in background tasks; the same as `await
        start()`, for callers that cannot await (the proxy's write hook)."""
        if self._started:
            return
        self._started = True
        if not self.scope.every:
            self.scope.add_listener(self)
        if self.share is not None:
            self.share.add_listener(self)
        for namespace in self.namespaces:
            self._spawn(namespace)
        self._check_synced()

    def _spawn(self, namespace: str | None) -> None:
        where = f" namespace={namespace}" if namespace else ""
        self._tasks[namespace] = asyncio.create_task(
            self._run(namespace), name=f"informer {self.name}{where}"
        )

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def _check_synced(self) -> None:
        if all(namespace in self._listed for namespace in self.namespaces):
            self._synced.set()

    async def stop(self) -> None:
        self.scope.remove_listener(self)
        if self.share is not None:
            self.share.remove_listener(self)
        tasks = [*self._tasks.values(), *self._entering.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self._entering.clear()

    def add_listener(self, listener: EventListener) -> None:
        """`listener` hears every change from now on, after ADDED for each object
        the store already holds."""
        self._listeners.append(listener)
        for held in list(self._store.values()):
            self._tell(listener, "ADDED", None, held.unpack(), True)

    def add_forget_listener(self, listener: ForgetListener) -> None:
        """`listener` hears the keys of the objects a share that shrank forgot."""
        self._forget_listeners.append(listener)

    def add_health_listener(self, listener: HealthListener) -> None:
        """`listener` hears every failed list or watch, and every list that succeeds."""
        self._health_listeners.append(listener)

    def _tell_health(self, error: ApiError | None) -> None:
        for listener in list(self._health_listeners):
            try:
                listener(error)
            except Exception:
                log.exception("health listener failed informer=%s", self.name)

    def covers(self, namespace: str | None) -> bool:
        """Whether the store holds the objects of `namespace` (None: of every
        namespace): never for a share's store, which holds some of each."""
        if self.share is not None:
            return False
        if namespace is None:
            return self.scope.every
        if not self.scope.contains(namespace):
            return False
        if self.cluster_wide:
            return namespace not in self._entering
        return namespace in self._listed

    @property
    def partial(self) -> bool:
        """Whether the store holds a replica's share of each namespace only."""
        return self.share is not None

    def holds(self, namespace: str | None, name: str) -> bool:
        """Whether the store holds that object (in a share: whether it is ours now)."""
        return (namespace or "", name) in self._store

    # ----- the scope's changes (ScopeListener) -------------------------------
    def namespace_entered(self, namespace: str) -> None:
        if not self._started:
            return
        if not self.cluster_wide:
            self._spawn(namespace)
            return
        previous = self._entering.pop(namespace, None)
        if previous is not None:
            previous.cancel()
        self._deleted_while_entering[namespace] = set()
        self._entering[namespace] = asyncio.create_task(
            self._list_entered(namespace), name=f"informer {self.name} entering {namespace}"
        )

    def share_changed(self, gained: frozenset[int], lost: frozenset[int]) -> None:
        """The share (kube/object_share.py) moved: forget what is no longer
        held, telling no event listener; then, if it grew, relist every watch
        (which objects it brings is not known), or if only the selector the
        server applies changed, restart the watches with the new one."""
        if not self._started:
            return
        if lost:
            self._forget_keys(
                [key for key, held in self._store.items() if held.bucket in lost],
                [key for key, (_, held) in self._written.items() if held and held.bucket in lost],
            )
        if not gained and self._selectors() == self._selectors_in_use:
            return
        for namespace in list(self._tasks):
            self._tasks.pop(namespace).cancel()
            self._spawn(namespace)

    def _forget_keys(self, keys: list[StoreKey], written: Iterable[StoreKey] = ()) -> None:
        for key in keys:
            self._drop(key)
        for key in written:
            self._written.pop(key, None)
        if keys:
            for listener in list(self._forget_listeners):
                try:
                    listener(list(keys))
                except Exception:
                    log.exception("forget listener failed informer=%s", self.name)

    def namespace_left(self, namespace: str) -> None:
        for tasks in (self._tasks, self._entering):
            task = tasks.pop(namespace, None)
            if task is not None:
                task.cancel()
        self._deleted_while_entering.pop(namespace, None)
        self._listed.discard(namespace)
        self._forget(namespace)

    # ----- what the store keeps ------------------------------------------------
    def _kept(self, obj: dict[str, Any], *, sent: bool = True) -> Held | None:
        """`obj` as the store keeps it, or None when it is not kept: out of the
        namespaces, or another share's (counted in `dropped` if the server `sent` it)."""
        if not self.scope.contains(_key(obj)[0]):
            return None
        if self.share is None:
            return hold(obj)
        bucket = self.share.bucket(obj, self.follows)
        if not self.share.holds_bucket(bucket):
            self.dropped += sent
            return None
        return hold(obj, bucket)

    def _keeps_still(self, key: StoreKey, held: Held) -> bool:
        """Whether an object kept a moment ago is still: the namespace or the
        share may have moved while a list was being dispatched."""
        if not self.scope.contains(key[0]):
            return False
        return self.share is None or self.share.holds_bucket(held.bucket)

    def _selectors(self) -> tuple[str | None, str | None]:
        """(shardSelector, label selector) of every list and watch: the
        share's, with the informer's own label selector."""
        if self.share is None:
            return None, self.label_selector
        if self.follows == "self":
            return self.share.shard_selector(), self.label_selector
        owner = self.share.owner_selector()
        return None, f"{self.label_selector},{owner}" if self.label_selector else owner

    def _forget(self, namespace: str) -> None:
        """Drop the objects of `namespace`, telling no one: they were not deleted."""
        for key in [key for key in self._store if key[0] == namespace]:
            self._drop(key)
        for key in [key for key in self._written if key[0] == namespace]:
            del self._written[key]

    # ----- reads ------------------------------------------------------------
    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object as the server has it: a copy of its own."""
        key = (namespace or "", name)
        written = self._newer_write(key)
        if written is not None:
            return None if written[1] is None else written[1].unpack()
        held = self._store.get(key)
        return None if held is None else held.unpack()

    def _newer_write(self, key: StoreKey) -> _Written | None:
        """What a run wrote (or deleted) that the watch has not delivered yet."""
        written = self._written.get(key)
        if written is None:
            return None
        held = self._store.get(key)
        if held is None or held.version is None or held.version < written[0]:
            return written
        del self._written[key]  # the watch has caught up
        return None

    def list(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """As the server would answer; raises SelectorError for a field
        selector only the server can evaluate."""
        keys, matches = self._listing(namespace, label_selector, field_selector)
        current = (self.get(*key) for key in keys)
        return [obj for obj in current if obj is not None and matches(obj)]

    async def list_yielding(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        every: int = 200,
    ) -> list[dict[str, Any]]:
        """`list`, letting the event loop run between every `every` objects:
        unpacking 10,000 objects takes ~0.6 s."""
        keys, matches = self._listing(namespace, label_selector, field_selector)
        found: list[dict[str, Any]] = []
        for index, key in enumerate(keys, 1):
            obj = self.get(*key)
            if obj is not None and matches(obj):
                found.append(obj)
            if index % every == 0:
                await asyncio.sleep(0)
        return found

    def _listing(
        self, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> tuple[list[StoreKey], Callable[[dict[str, Any]], bool]]:
        """The keys a list reads, in the server's order, and what an object
        must match; raises SelectorError for a selector only the server evaluates."""
        labels_match = label_predicate(label_selector)
        fields_match = field_predicate(field_selector)
        keys = sorted(
            key
            for key in set(self._store) | set(self._written)
            if namespace is None or key[0] == namespace  # unpack only what is asked for
        )

        def matches(obj: dict[str, Any]) -> bool:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            return bool(labels_match(labels) and fields_match(obj))

        return keys, matches

    def __len__(self) -> int:
        return len(self._store)

    @property
    def held_objects(self) -> int:
        return len(self._store)

    @property
    def held_bytes(self) -> int:
        """Estimated bytes of the stored objects (kube/transform.py `Held.size`)."""
        return self._held_bytes

    def remember(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        """Write-through from the proxy: what a run just wrote (or deleted) is
        read back at once, before the watch delivers it. Never hides a newer copy,
        and never holds an object outside the scope."""
        key = _key(obj)
        new_version = resource_version(obj)
        if new_version is None:
            return
        kept = self._kept(obj, sent=False)
        if kept is None:
            return
        newest = self._newest_version(key)
        if newest is not None and newest > new_version:
            return
        self._written[key] = (new_version, None if deleted else kept)

    def _newest_version(self, key: StoreKey) -> int | None:
        """The resourceVersion `get` would answer with (None: none held)."""
        written = self._newer_write(key)
        if written is not None:
            return None if written[1] is None else written[0]
        held = self._store.get(key)
        return None if held is None else held.version

    # ----- the loop ---------------------------------------------------------
    async def _run(self, namespace: str | None) -> None:
        version: str | None = None
        listed_generation = 0
        backoff = BACKOFF_START
        where = f" namespace={namespace}" if namespace else ""
        while True:
            try:
                generation = await self.api.current_generation()
                if version is not None and generation != listed_generation:
                    log.info("kubeconfig changed, relisting informer=%s%s", self.name, where)
                    version = None
                if version is None:
                    version = await self._relist(namespace)
                    listed_generation = generation
                shard_selector, label_selector = self._selectors_in_use = self._selectors()
                async for event in self.api.watch(
                    self.resource,
                    namespace,
                    resource_version=version,
                    label_selector=label_selector,
                    shard_selector=shard_selector,
                    timeout_seconds=random.randint(*WATCH_TIMEOUT),
                ):
                    self.received += 1
                    version = self._apply(event) or version
                backoff = BACKOFF_START
            except asyncio.CancelledError:
                raise
            except ApiError as error:
                if error.status == 410:
                    log.info("watch expired, relisting informer=%s%s", self.name, where)
                    version = None
                    continue
                if error.status == 403 and namespace is None and not self.scope.every:
                    self._watch_each_namespace(error)
                    return
                self._tell_health(error)
                log.warning(
                    "watch failed, retrying informer=%s%s in=%.1fs error=%s",
                    self.name,
                    where,
                    backoff,
                    error,
                )
                await self.api.pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
            except Exception:
                log.exception("informer crashed, retrying informer=%s%s", self.name, where)
                await self.api.pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _watch_each_namespace(self, error: ApiError) -> None:
        """The cluster-wide list or watch was refused (RBAC for some namespaces
        only): one watch per namespace instead, from now on."""
        log.warning(
            "cluster-wide list refused, watching each namespace instead informer=%s "
            "namespaces=%d error=%s",
            self.name,
            len(self.scope.namespaces),
            error,
        )
        self.cluster_wide = False
        self._tasks.pop(None, None)
        self._listed.discard(None)
        for task in self._entering.values():
            task.cancel()
        self._entering.clear()
        self._deleted_while_entering.clear()
        for namespace in self.namespaces:
            self._spawn(namespace)
        self._check_synced()

    async def _relist(self, namespace: str | None) -> str:
        shard_selector, label_selector = self._selectors()
        listing = await self.api.list(
            self.resource,
            namespace,
            label_selector=label_selector,
            shard_selector=shard_selector,
        )
        self.relists += 1
        self.received += len(listing.get("items") or [])
        fresh = {}
        for item in listing.get("items") or []:
            key = _key(item)
            item.setdefault("apiVersion", self.resource.api_version)
            item.setdefault("kind", self.resource.kind)
            kept = self._kept(item)
            if kept is None:
                continue  # another namespace's (a cluster-wide list), or another share's
            fresh[key] = (item, kept)
            if len(fresh) % DISPATCH_BATCH == 0:
                await asyncio.sleep(0)  # a list of thousands: other tasks run meanwhile
        version = (listing.get("metadata") or {}).get("resourceVersion") or ""
        self.resource_version = version
        gone = [key for key in self._store if key not in fresh and namespace in (None, key[0])]
        for number, key in enumerate(gone, 1):
            old = self._drop(key)
            if old is not None:
                self._dispatch("DELETED", old.unpack(), None, listed=True)
            if number % DISPATCH_BATCH == 0:
                await asyncio.sleep(0)
        for number, (key, (item, held)) in enumerate(fresh.items(), 1):
            if self._keeps_still(key, held):  # it may have left while we yielded
                old = self._store.get(key)
                self._put(key, held)
                if old is None:
                    self._dispatch("ADDED", None, item, listed=True)
                elif old.version != held.version:
                    self._dispatch("MODIFIED", old.unpack(), item, listed=True)
            if number % DISPATCH_BATCH == 0:
                await asyncio.sleep(0)
        self._listed.add(namespace)
        self._check_synced()
        self._tell_health(None)
        return version

    async def _list_entered(self, namespace: str) -> None:
        """Cluster-wide: the objects of a namespace that just entered the scope,
        whose events the watch dropped until now."""
        backoff = BACKOFF_START
        while True:
            shard_selector, label_selector = self._selectors()
            try:
                listing = await self.api.list(
                    self.resource,
                    namespace,
                    label_selector=label_selector,
                    shard_selector=shard_selector,
                )
                break
            except ApiError as error:
                log.warning(
                    "listing a namespace that entered failed, retrying informer=%s "
                    "namespace=%s in=%.1fs error=%s",
                    self.name,
                    namespace,
                    backoff,
                    error,
                )
                await self.api.pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
        deleted = self._deleted_while_entering.get(namespace, set())
        self.received += len(listing.get("items") or [])
        for number, item in enumerate(listing.get("items") or [], 1):
            key = _key(item)
            old = self._store.get(key)
            old_version = None if old is None else old.version
            newer_held = old_version is not None and (resource_version(item) or 0) <= old_version
            if key in deleted or newer_held:
                continue
            item.setdefault("apiVersion", self.resource.api_version)
            item.setdefault("kind", self.resource.kind)
            kept = self._kept(item)
            if kept is None:
                continue
            self._put(key, kept)
            self._dispatch(
                "ADDED" if old is None else "MODIFIED", _unpacked(old), item, listed=True
            )
            if number % DISPATCH_BATCH == 0:
                await asyncio.sleep(0)
        self._deleted_while_entering.pop(namespace, None)
        self._entering.pop(namespace, None)

    def _apply(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        obj = event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = version
        if kind == "BOOKMARK":
            return version
        key = _key(obj)
        if not self.scope.contains(key[0]):
            return version  # a cluster-wide watch: another namespace's
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        old = self._store.get(key)
        kept = None if kind == "DELETED" else self._kept(obj)
        if kind in ("ADDED", "MODIFIED") and kept is None:
            if old is not None:
                # Relabelled into another share: theirs now, not deleted.
                self._forget_keys([key])
            return version
        share = self.share
        if kind == "DELETED" and old is None and share and not share.holds(obj, self.follows):
            self.dropped += 1
            return version  # another share's
        if kind == "DELETED":
            self._drop(key)
            self._forget_written(key, resource_version(obj))
            if key[0] in self._deleted_while_entering:
                self._deleted_while_entering[key[0]].add(key)
            self._dispatch("DELETED", _unpacked(old), obj)
        elif kind in ("ADDED", "MODIFIED"):
            assert kept is not None
            self._put(key, kept)
            self._dispatch("ADDED" if old is None else "MODIFIED", _unpacked(old), obj)
        return version

    # ----- the store ----------------------------------------------------------
    def _put(self, key: StoreKey, held: Held) -> None:
        if key in self._store:
            self._drop(key)
        self._store[key] = held
        self._held_bytes += held.size
        self._forget_written(key, held.version)

    def _drop(self, key: StoreKey) -> Held | None:
        held = self._store.pop(key, None)
        if held is not None:
            self._held_bytes -= held.size
            self._forget_written(key, held.version)
        return held

    def _forget_written(self, key: StoreKey, seen: int | None) -> None:
        """The watch has delivered `seen`: a write it covers is no longer
        needed (else its copy would stay until someone read the key)."""
        written = self._written.get(key)
        if written is not None and seen is not None and written[0] <= seen:
            del self._written[key]

    def _dispatch(
        self,
        kind: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        *,
        listed: bool = False,
    ) -> None:
        for listener in list(self._listeners):
            self._tell(listener, kind, old, new, listed)

    def _tell(
        self,
        listener: EventListener,
        kind: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        listed: bool,
    ) -> None:
        # One listener's bug must not keep the change from the others.
        try:
            listener(kind, old, new, listed)
        except Exception:
            log.exception("event handler failed informer=%s event=%s", self.name, kind)
