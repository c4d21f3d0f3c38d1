"""An in-memory Kubernetes API with the async client's face, for unit tests.

`FakeApi` is a `kube.api.Api`, as `kube.client.ApiClient` is (get, list, create,
replace, merge patch, delete, watch) from objects held in memory, as the API
server would: resourceVersion preconditions give 409 Conflict, a name taken
gives 409 AlreadyExists, a missing object 404, and an object whose last
finalizer goes while it is being deleted is gone; a server-side apply is a
merge patch that creates what is missing. Every write is kept in order
(`writes`, `statuses`, `events`), so a test asserts on what a user of the
cluster would see. `before(verb, action)` runs `action` ahead of a verb:
another writer racing us, or an API server failing in a way no one planned.
A watch replays what the test `send`s.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.kube.api import PatchType
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.selectors import label_predicate
from ansible_operator.kube.types import Resource

Key = tuple[str, str | None, str]  # plural, namespace, name
BeforeAction = Callable[[Resource, dict[str, Any]], None]


@dataclass(frozen=True)
class Write:
    verb: str  # create, replace, patch, delete
    plural: str
    namespace: str | None
    name: str
    body: Any


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: None removes a key, lists are replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _labels_match(obj: dict[str, Any], selector: str | None) -> bool:
    """Label selectors as the API server reads them (the operator writes
    equality terms, and a shard ring's `in (...)` and exists terms)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return label_predicate(selector)(labels)


class FakeApi:
    """The one fake of `kube.api.Api` (see the module's docstring)."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.writes: list[Write] = []
        self.lists: list[tuple[str, str | None, str | None]] = []
        self.shard_selectors: list[str | None] = []  # of each list, in order
        self.watch_versions: list[str | None] = []  # the resourceVersion each watch began at
        self._before: dict[str, list[BeforeAction]] = {}
        self._feeds: dict[str, asyncio.Queue[dict[str, Any] | Exception]] = {}
        self._version = 0

    # ----- what a test sets up and reads ------------------------------------
    def put(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Hold `obj` as the test wrote it (a resourceVersion if it has none)."""
        if "resourceVersion" in (obj.get("metadata") or {}):
            return self._store(resource, obj, version=obj["metadata"]["resourceVersion"])
        return self._store(resource, obj)

    def held(self, resource: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        return self.objects.get((resource.plural, namespace, name))

    def before(self, verb: str, action: BeforeAction) -> None:
        """Run `action(resource, body)` ahead of every `verb`; it may change
        what is held (another writer) or raise (a failing API server)."""
        self._before.setdefault(verb, []).append(action)

    @property
    def statuses(self) -> list[dict[str, Any]]:
        """Every status written, in order."""
        return [w.body["status"] for w in self.writes if w.verb == "patch status"]

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every Event created, in order."""
        return [w.body for w in self.writes if w.verb == "create" and w.plural == "events"]

    def send(self, resource: Resource, kind: str, obj: dict[str, Any]) -> None:
        """A watch event (ADDED, MODIFIED, DELETED, BOOKMARK) for the watchers of
        `resource`, after what was sent before."""
        self._feed(resource).put_nowait({"type": kind, "object": copy.deepcopy(obj)})

    def end_watch(self, resource: Resource, error: Exception | None = None) -> None:
        """The watch of `resource` ends, once it has said what was sent before: as the
        server ends one (None), or failing with `error` (410 Gone: its history is gone)."""
        self._feed(resource).put_nowait(error or _END)

    # ----- the client's face ------------------------------------------------
    async def current_generation(self) -> int:
        return 0

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self._run_before("get", resource, {})
        return copy.deepcopy(self._existing(resource, name, namespace))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard_selector: str | None = None,  # ignored, as by a server without the gate
    ) -> dict[str, Any]:
        self._run_before("list", resource, {})
        self.lists.append((resource.plural, namespace, label_selector))
        self.shard_selectors.append(shard_selector)
        items = [
            copy.deepcopy(obj)
            for (plural, held_namespace, _), obj in self.objects.items()
            if plural == resource.plural
            and (namespace is None or held_namespace == namespace)
            and _labels_match(obj, label_selector)
        ]
        newest = max((_version_of(obj) for obj in items), default=0)
        return {"metadata": {"resourceVersion": str(max(newest, self._version))}, "items": items}

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_versions.append(resource_version)
        feed = self._feed(resource)
        while True:
            event = await feed.get()
            if event is _END:
                return
            if isinstance(event, Exception):
                raise event
            yield event

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        body = copy.deepcopy(dict(body))
        self._run_before("create", resource, body)
        metadata = body.setdefault("metadata", {})
        if namespace is not None:
            metadata.setdefault("namespace", namespace)
        if "name" not in metadata:
            metadata["name"] = f"{metadata.get('generateName', '')}{self._version + 1}"
        key = (resource.plural, metadata.get("namespace"), metadata["name"])
        self.writes.append(Write("create", *key, copy.deepcopy(body)))
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f"{resource.plural} {metadata['name']} exists")
        return self._store(resource, body)

    async def replace(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        body = dict(body)
        self._run_before("replace", resource, body)
        self.writes.append(Write("replace", resource.plural, namespace, name, copy.deepcopy(body)))
        current = self._existing(resource, name, namespace)
        self._check_version(body, current)
        return self._store(resource, body)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str = "ansible-operator",
        force: bool = False,
    ) -> dict[str, Any]:
        self._run_before("patch", resource, patch)
        verb = "patch status" if subresource == "status" else "patch"
        self.writes.append(Write(verb, resource.plural, namespace, name, copy.deepcopy(patch)))
        if patch_type == "apply" and (resource.plural, namespace, name) not in self.objects:
            return self._store(resource, patch)  # server-side apply creates what is missing
        current = self._existing(resource, name, namespace)
        self._check_version(patch, current)
        if subresource == "status":  # the status subresource writes the status alone
            updated = copy.deepcopy(current)
            updated["status"] = merge_patch(current.get("status"), patch.get("status"))
        else:
            updated = merge_patch(current, {k: v for k, v in patch.items() if k != "status"})
        written = self._store(resource, updated)
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get(
            "finalizers"
        ):
            del self.objects[(resource.plural, namespace, name)]  # its last finalizer went
        return written

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
    ) -> dict[str, Any]:
        self._run_before("delete", resource, {})
        self.writes.append(Write("delete", resource.plural, namespace, name, None))
        current = self._existing(resource, name, namespace)
        if current["metadata"].get("finalizers"):
            current["metadata"].setdefault("deletionTimestamp", "2024-01-01T00:00:00Z")
            return self._store(resource, current)
        del self.objects[(resource.plural, namespace, name)]
        return copy.deepcopy(current)

    # ----- the server's rules -----------------------------------------------
    def _store(
        self, resource: Resource, obj: dict[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        """Hold a copy of `obj` under a new resourceVersion; a copy of what is held."""
        obj = copy.deepcopy(obj)
        metadata = obj.setdefault("metadata", {})
        self._version += 1
        metadata["resourceVersion"] = version or str(self._version)
        metadata.setdefault("uid", f"uid-{metadata.get('name')}")
        self.objects[(resource.plural, metadata.get("namespace"), metadata["name"])] = obj
        return copy.deepcopy(obj)

    def _existing(self, resource: Resource, name: str, namespace: str | None) -> dict[str, Any]:
        found = self.objects.get((resource.plural, namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f"{resource.plural} {name} not found")
        return found

    @staticmethod
    def _check_version(body: dict[str, Any], current: dict[str, Any]) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted not in (None, current["metadata"]["resourceVersion"]):
            raise ApiError(409, "Conflict", "the object has been modified")

    def _run_before(self, verb: str, resource: Resource, body: dict[str, Any]) -> None:
        for action in self._before.get(verb, []):
            action(resource, body)

    def _feed(self, resource: Resource) -> asyncio.Queue[dict[str, Any] | Exception]:
        return self._feeds.setdefault(resource.plural, asyncio.Queue())


_END = StopAsyncIteration()  # in a watch's feed: the server ended the watch


def _version_of(obj: dict[str, Any]) -> int:
    version = (obj.get("metadata") or {}).get("resourceVersion", "0")
    return int(version) if str(version).isdigit() else 0
