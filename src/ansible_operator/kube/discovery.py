"""Discovery and REST mapping: which URL serves a group/version/kind.

The mapper reads the aggregated discovery documents once (`/api`, `/apis`)
and again when asked for something it does not know, so a CRD installed
after start-up is found; refreshes are spaced by `REFRESH_INTERVAL`, and
callers asking meanwhile share the next one. API services that do not
answer (a broken metrics-server) are skipped, not fatal. `known` answers from
the last discovery without asking again: what the manager uses for watched
kinds, so kinds the server does not serve cost nothing at start-up
(manager/unserved.py looks for them again, with backoff).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from ansible_operator.kube.types import Resource

if TYPE_CHECKING:
    from ansible_operator.kube.client import ApiClient

log = logging.getLogger("ansible_operator.discovery")

REFRESH_INTERVAL = 1.0  # at most one refresh a second, however many unknown kinds are asked


class UnknownResource(LookupError):
    """The API server serves no such kind, even after a fresh discovery."""


def _resources(group: str, version: str, document: dict[str, Any]) -> list[Resource]:
    found: dict[str, Resource] = {}
    subresources: dict[str, set[str]] = {}
    for entry in document.get("resources") or []:
        name = entry.get("name", "")
        plural, _, sub = name.partition("/")
        if sub:
            subresources.setdefault(plural, set()).add(sub)
            continue
        found[plural] = Resource(
            group=group,
            version=version,
            kind=entry.get("kind", ""),
            plural=plural,
            namespaced=bool(entry.get("namespaced")),
            verbs=frozenset(entry.get("verbs") or ()),
        )
    return [
        Resource(
            r.group,
            r.version,
            r.kind,
            r.plural,
            r.namespaced,
            r.verbs,
            frozenset(subresources.get(r.plural, ())),
        )
        for r in found.values()
    ]


class RestMapper:
    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._by_kind: dict[tuple[str, str, str], Resource] = {}
        self._by_plural: dict[tuple[str, str, str], Resource] = {}
        self._lock = asyncio.Lock()
        self._loaded_at: float | None = None
        self.refreshes = 0  # discoveries done so far
        self._refreshed = asyncio.Event()  # set, then replaced, by each discovery

    async def resource_for(self, group: str, version: str, kind: str) -> Resource:
        return await self._find("kind", (group, version, kind))

    async def resource_for_plural(self, group: str, version: str, plural: str) -> Resource:
        return await self._find("plural", (group, version, plural))

    def known(self, group: str, version: str, kind: str) -> Resource | None:
        """The kind as the last discovery saw it (None: not served then)."""
        return self._by_kind.get((group, version, kind))

    async def wait_refreshed(self, seen: int, seconds: float) -> bool:
        """Wait up to `seconds` for a discovery after the `seen`-th."""
        refreshed = self._refreshed
        if self.refreshes > seen:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(refreshed.wait(), seconds)
        return self.refreshes > seen

    def _index(self, by: str) -> dict[tuple[str, str, str], Resource]:
        return self._by_kind if by == "kind" else self._by_plural

    async def _find(self, by: str, key: tuple[str, str, str]) -> Resource:
        found = self._index(by).get(key)
        if found is not None:
            return found
        async with self._lock:
            found = self._index(by).get(key)
            if found is None:
                if self._loaded_at is not None:
                    # A kind asked for right after a refresh may be a CRD created
                    # a moment ago: wait out the interval rather than answer "unknown".
                    since = time.monotonic() - self._loaded_at
                    await asyncio.sleep(max(0.0, REFRESH_INTERVAL - since))
                await self._refresh()
                found = self._index(by).get(key)
        if found is None:
            group, version, what = key
            raise UnknownResource(
                f"the API server does not serve {what} in {group or 'core'}/{version} "
                "(is its CRD installed?)"
            )
        return found

    async def refresh(self) -> None:
        async with self._lock:
            await self._refresh()

    async def _refresh(self) -> None:
        by_kind: dict[tuple[str, str, str], Resource] = {}
        by_plural: dict[tuple[str, str, str], Resource] = {}
        versions: list[tuple[str, str]] = []
        core = await self.api.request("GET", "/api")
        versions += [("", v) for v in core.get("versions") or []]
        groups = await self.api.request("GET", "/apis")
        for group in groups.get("groups") or []:
            versions += [(group["name"], v["version"]) for v in group.get("versions") or []]

        async def one(group: str, version: str) -> list[Resource]:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                return _resources(group, version, await self.api.request("GET", path))
            except Exception as error:  # an unavailable aggregated API is not our failure
                log.debug("discovery skipped %s: %s", path, error)
                return []

        for resources in await asyncio.gather(*(one(g, v) for g, v in versions)):
            for resource in resources:
                by_kind.setdefault((resource.group, resource.version, resource.kind), resource)
                by_plural[(resource.group, resource.version, resource.plural)] = resource
        self._by_kind, self._by_plural = by_kind, by_plural
        self._loaded_at = time.monotonic()
        self.refreshes += 1
        self._refreshed.set()
        self._refreshed = asyncio.Event()
