"""An informer: list, then watch from the list's resourceVersion, keeping an
in-memory store of one kind (in all namespaces, or in each watched namespace)
and telling its listeners what changed.

- A listener added late first hears ADDED for every object already held, as
  client-go's handlers do: whatever it builds from the events misses nothing.
- Bookmarks keep the resourceVersion fresh, so a reconnect resumes where it
  left off instead of relisting.
- 410 Gone (the resourceVersion is too old): relist, and diff the fresh list
  against the store, so deletes missed while disconnected are still reported.
- Any other failure: reconnect with exponential backoff (capped), logged;
  the wait ends early when the kubeconfig changes.
- A changed kubeconfig (kube/config.py): relist, since the new server may be
  another cluster whose resourceVersions mean nothing here.
- The store keeps each object without managedFields and the last-applied
  annotation (kube/transform.py): listeners see that shared copy; `get` and
  `list` put them back, answering as the server would.
- Memory held is counted as objects come and go (`held_objects`,
  `held_bytes`), so reporting it costs nothing per object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.selectors import field_predicate, label_predicate
from ansible_operator.kube.transform import Removed, restore, transform
from ansible_operator.kube.types import Resource

log = logging.getLogger("ansible_operator.informer")

EventListener = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]
StoreKey = tuple[str, str]  # namespace ("" when cluster-scoped), name

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
YIELD_EVERY = 500  # objects transformed in a relist between two turns of the event loop
WATCH_TIMEOUT = (240, 480)  # seconds; spread so informers do not all reconnect together


def _key(obj: dict[str, Any]) -> StoreKey:
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


_Written = tuple[int, dict[str, Any] | None, Removed | None]  # version, object, its remainder


def _version(obj: dict[str, Any] | None) -> int | None:
    if obj is None:
        return None
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


class Informer:
    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        *,
        namespaces: Iterable[str] | None = None,
        label_selector: str | None = None,
        on_event: EventListener | None = None,
        name: str = "",
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespaces: list[str | None] = (
            list(namespaces) if namespaces and resource.namespaced else [None]
        )
        self.label_selector = label_selector
        self._listeners: list[EventListener] = [on_event] if on_event is not None else []
        self.name = name or f"{resource.group or 'core'}/{resource.version}/{resource.plural}"
        self._store: dict[StoreKey, dict[str, Any]] = {}
        # Per stored object: its estimated bytes, and what the transform took.
        self._held: dict[StoreKey, tuple[int, Removed | None]] = {}
        self._held_bytes = 0
        # Read-your-writes: what runs wrote (or deleted: None) through the proxy,
        # until the watch catches up. Kept apart from the store, so the watch's
        # events still compare the true previous state with the new one.
        self._written: dict[StoreKey, _Written] = {}
        self._synced_namespaces: set[str | None] = set()
        self._synced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.resource_version = ""
        self.relists = 0

    # ----- lifecycle --------------------------------------------------------
    async def start(self) -> None:
        self.begin()

    def begin(self) -> None:
        """Start listing and watching in background tasks; the same as `await
        start()`, for callers that cannot await (the proxy's write hook)."""
        if self._tasks:
            return
        for namespace in self.namespaces:
            self._tasks.append(
                asyncio.create_task(self._run(namespace), name=f"informer {self.name}")
            )

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def add_listener(self, listener: EventListener) -> None:
        """`listener` hears every change from now on, after ADDED for each object
        the store already holds."""
        self._listeners.append(listener)
        for obj in list(self._store.values()):
            self._tell(listener, "ADDED", None, obj)

    def covers(self, namespace: str | None) -> bool:
        """Whether the store holds the objects of `namespace` (None: of every namespace)."""
        return None in self.namespaces or namespace in self.namespaces

    # ----- reads ------------------------------------------------------------
    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object as the server has it (what the transform took put back)."""
        key = (namespace or "", name)
        stored = self._store.get(key)
        written = self._written.get(key)
        if written is not None:
            version, obj, removed = written
            stored_version = _version(stored)
            if stored_version is None or stored_version < version:
                return None if obj is None else restore(obj, removed)
            del self._written[key]  # the watch has caught up
        if stored is None:
            return None
        return restore(stored, self._held[key][1])

    def list(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """As the server would answer; raises SelectorError for a field
        selector only the server can evaluate."""
        labels_match = label_predicate(label_selector)
        fields_match = field_predicate(field_selector)
        keys = sorted(set(self._store) | set(self._written))
        current = (self.get(*key) for key in keys)
        return [
            obj
            for obj in current
            if obj is not None
            and (namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace)
            and labels_match((obj.get("metadata") or {}).get("labels") or {})
            and fields_match(obj)
        ]

    def __len__(self) -> int:
        return len(self._store)

    @property
    def held_objects(self) -> int:
        return len(self._store)

    @property
    def held_bytes(self) -> int:
        """Estimated bytes of the stored objects (kube/transform.py `transform`)."""
        return self._held_bytes

    def remember(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        """Write-through from the proxy: what a run just wrote (or deleted) is
        read back at once, before the watch delivers it. Never hides a newer copy."""
        key = _key(obj)
        new_version = _version(obj)
        if new_version is None:
            return
        newest = _version(self.get(*key))
        if newest is not None and newest > new_version:
            return
        if deleted:
            self._written[key] = (new_version, None, None)
            return
        obj = dict(obj, metadata=dict(obj.get("metadata") or {}))  # the caller's stays whole
        if isinstance(obj["metadata"].get("annotations"), dict):
            obj["metadata"]["annotations"] = dict(obj["metadata"]["annotations"])
        kept, removed, _ = transform(obj)
        self._written[key] = (new_version, kept, removed)

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
                async for event in self.api.watch(
                    self.resource,
                    namespace,
                    resource_version=version,
                    label_selector=self.label_selector,
                    timeout_seconds=random.randint(*WATCH_TIMEOUT),
                ):
                    version = self._apply(event) or version
                backoff = BACKOFF_START
            except asyncio.CancelledError:
                raise
            except ApiError as error:
                if error.status == 410:
                    log.info("watch expired, relisting informer=%s%s", self.name, where)
                    version = None
                    continue
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

    async def _relist(self, namespace: str | None) -> str:
        listing = await self.api.list(self.resource, namespace, label_selector=self.label_selector)
        self.relists += 1
        fresh = {}
        for item in listing.get("items") or []:
            item.setdefault("apiVersion", self.resource.api_version)
            item.setdefault("kind", self.resource.kind)
            fresh[_key(item)] = transform(item)
            if len(fresh) % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a list of thousands: other tasks run meanwhile
        scope = [key for key in self._store if namespace is None or key[0] == namespace]
        for key in scope:
            if key not in fresh:
                self._dispatch("DELETED", self._drop(key), None)
        for key, (item, removed, size) in fresh.items():
            old = self._store.get(key)
            self._put(key, item, removed, size)
            if old is None:
                self._dispatch("ADDED", None, item)
            elif _version(old) != _version(item):
                self._dispatch("MODIFIED", old, item)
        version = (listing.get("metadata") or {}).get("resourceVersion") or ""
        self.resource_version = version
        self._synced_namespaces.add(namespace)
        if len(self._synced_namespaces) == len(self.namespaces):
            self._synced.set()
        return version

    def _apply(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        obj = event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = version
        if kind == "BOOKMARK":
            return version
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        obj, removed, size = transform(obj)
        key = _key(obj)
        old = self._store.get(key)
        if kind == "DELETED":
            self._drop(key)
            self._forget_written(key, _version(obj))
            self._dispatch("DELETED", old, obj)
        elif kind in ("ADDED", "MODIFIED"):
            self._put(key, obj, removed, size)
            self._dispatch("ADDED" if old is None else "MODIFIED", old, obj)
        return version

    # ----- the store ----------------------------------------------------------
    def _put(self, key: StoreKey, obj: dict[str, Any], removed: Removed | None, size: int) -> None:
        if key in self._store:
            self._drop(key)
        self._store[key] = obj
        self._held[key] = (size, removed)
        self._held_bytes += size
        self._forget_written(key, _version(obj))

    def _drop(self, key: StoreKey) -> dict[str, Any] | None:
        obj = self._store.pop(key, None)
        if obj is not None:
            size, _ = self._held.pop(key)
            self._held_bytes -= size
            self._forget_written(key, _version(obj))
        return obj

    def _forget_written(self, key: StoreKey, seen: int | None) -> None:
        """The watch has delivered `seen`: a write it covers is no longer
        needed (else its copy would stay until someone read the key)."""
        written = self._written.get(key)
        if written is not None and seen is not None and written[0] <= seen:
            del self._written[key]

    def _dispatch(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for listener in list(self._listeners):
            self._tell(listener, kind, old, new)

    def _tell(
        self,
        listener: EventListener,
        kind: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> None:
        # One listener's bug must not keep the change from the others.
        try:
            listener(kind, old, new)
        except Exception:
            log.exception("event handler failed informer=%s event=%s", self.name, kind)
