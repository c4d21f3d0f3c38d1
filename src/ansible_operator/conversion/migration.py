"""Storage migration: every stored object of a kind rewritten in the CRD's storage version,
then the other versions removed from its `status.storedVersions`.

After a CRD's storage version changes, objects stay in etcd in the version they were
written in until something writes them again (cluster-api #10513): a later CRD that drops
the old version cannot be applied while `storedVersions` lists it. This does what
kube-storage-version-migrator does, for one kind: list the objects (in the storage
version, so through the conversion webhook), write each back unchanged (a PUT: the API
server encodes it in the storage version; one already stored so is not written again),
then set `storedVersions` to the storage version alone.

Resumable: the objects come in key order (namespace/name), and after each page the last
one done and the count are kept in the CRD's annotation `PROGRESS`; a run that finds it
(for the same storage version) starts after it. An object changed meanwhile (409) was
written in the storage version by whoever changed it; one deleted meanwhile (404) is gone:
both count as done.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.types import Resource

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False
)
PROGRESS = "conversion.ansible-operator.io/storage-migration"
PAGE = 200
FIELD_MANAGER = "ansible-operator-migrate"


class MigrationError(Exception):
    """The migration cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class Progress:
    """What a step of the migration says: objects done so far, of about how many."""

    crd: str
    storage_version: str
    migrated: int
    written: int  # of them, objects that were stored in another version and rewritten
    total: int | None  # None: not known yet
    last: str  # namespace/name of the last object done


@dataclass(frozen=True)
class Outcome:
    crd: str
    storage_version: str
    migrated: int
    written: int
    stored_before: list[str]
    stored_after: list[str]
    resumed_after: str  # "" when started from the beginning


def storage_version(crd: dict[str, Any]) -> str:
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("storage"):
            return str(version["name"])
    raise MigrationError(f"CRD {crd['metadata']['name']} declares no storage version")


def resource_of(crd: dict[str, Any], version: str) -> Resource:
    spec = crd["spec"]
    return Resource(
        spec["group"],
        version,
        spec["names"]["kind"],
        spec["names"]["plural"],
        spec.get("scope") == "Namespaced",
    )


def key_of(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


async def find_crd(api: ApiClient, kind: str) -> dict[str, Any]:
    """The CRD named by `kind`: its name (`harborclusters.goharbor.io`), `Kind.group`,
    a plural or a kind alone when one CRD has it."""
    try:
        return await api.get(CRDS, kind)
    except ApiError as error:
        if error.status != 404:
            raise
    listing = await api.list(CRDS)
    wanted_kind, _, wanted_group = kind.partition(".")
    found = [
        crd
        for crd in listing.get("items") or []
        if wanted_kind.lower()
        in (
            crd["spec"]["names"]["kind"].lower(),
            crd["spec"]["names"]["plural"],
            crd["spec"]["names"].get("singular", ""),
        )
        and (not wanted_group or crd["spec"]["group"] == wanted_group)
    ]
    if not found:
        raise MigrationError(
            f"no CRD serves {kind!r} (give its name, such as harborclusters.goharbor.io, or "
            "Kind.group)"
        )
    if len(found) > 1:
        names = ", ".join(sorted(crd["metadata"]["name"] for crd in found))
        raise MigrationError(f"{kind!r} is served by several CRDs ({names}): give one's name")
    return found[0]


async def migrate(
    api: ApiClient,
    crd: dict[str, Any],
    *,
    report: Callable[[Progress], None] = lambda _: None,
    page: int = PAGE,
) -> Outcome:
    name = crd["metadata"]["name"]
    storage = storage_version(crd)
    stored_before = list((crd.get("status") or {}).get("storedVersions") or [])
    resource = resource_of(crd, storage)
    progress = _progress(crd, storage)
    after = progress.get("after", "") if progress else ""
    migrated = int(progress.get("migrated", 0)) if progress else 0
    written = int(progress.get("written", 0)) if progress else 0
    params: dict[str, str] = {"limit": str(page)}
    total: int | None = None
    while True:
        try:
            listing = await api.request("GET", resource.path(), params=params)
        except ApiError as error:
            raise MigrationError(
                f"cannot list {name} in {storage}: {error} (objects stored in another version "
                "are read through the conversion webhook: is the operator running?)"
            ) from None
        items = listing.get("items") or []
        remaining = (listing.get("metadata") or {}).get("remainingItemCount")
        if total is None:
            total = migrated + len(items) + int(remaining) if isinstance(remaining, int) else None
        for obj in items:
            key = key_of(obj)
            if after and key <= after:
                continue  # done by the run that was interrupted
            written += await _rewrite(api, resource, obj)
            migrated += 1
            after = key
        report(Progress(name, storage, migrated, written, total, after))
        await _keep_progress(api, name, storage, after, migrated, written)
        token = (listing.get("metadata") or {}).get("continue")
        if not token:
            break
        params["continue"] = token
    stored_after = [storage]
    if stored_before != stored_after:
        await api.patch(
            CRDS,
            name,
            {"status": {"storedVersions": stored_after}},
            subresource="status",
            field_manager=FIELD_MANAGER,
        )
    await _keep_progress(api, name, storage, None, migrated, written)
    return Outcome(
        name,
        storage,
        migrated,
        written,
        stored_before,
        stored_after,
        progress.get("after", "") if progress else "",
    )


async def _rewrite(api: ApiClient, resource: Resource, obj: dict[str, Any]) -> int:
    """Write `obj` back as read: 1 if the API server stored it anew (its resourceVersion
    moved), 0 if it already was in the storage version, changed or went meanwhile."""
    metadata = obj.get("metadata") or {}
    try:
        answer = await api.replace(resource, metadata["name"], obj, metadata.get("namespace"))
    except ApiError as error:
        if error.status in (404, 409):
            return 0
        raise MigrationError(f"cannot rewrite {key_of(obj)}: {error}") from None
    return int(
        (answer.get("metadata") or {}).get("resourceVersion") != metadata.get("resourceVersion")
    )


def _progress(crd: dict[str, Any], storage: str) -> dict[str, Any] | None:
    text = ((crd.get("metadata") or {}).get("annotations") or {}).get(PROGRESS)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(found, dict) or found.get("storageVersion") != storage:
        return None  # another migration's, or none: from the beginning
    return found


async def _keep_progress(
    api: ApiClient, name: str, storage: str, after: str | None, migrated: int, written: int
) -> None:
    value = (
        None
        if after is None
        else json.dumps(
            {"storageVersion": storage, "after": after, "migrated": migrated, "written": written},
            separators=(",", ":"),
        )
    )
    await api.patch(
        CRDS,
        name,
        {"metadata": {"annotations": {PROGRESS: value}}},
        field_manager=FIELD_MANAGER,
    )
