"""The informer's recovery paths, against a scripted API (the happy path runs
against the real API server in tests/integration/test_kube_client.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ansible_operator.kube import informer as informer_module
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.types import Resource

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)


def cm(name: str, version: int, **data: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)},
        "data": data,
    }


class ScriptedApi:
    """Lists return the next prepared listing; watches replay a script of
    events, then raise what the script says (or end)."""

    def __init__(self, listings: list[list[dict[str, Any]]], watches: list[Any]) -> None:
        self.listings = listings
        self.watches = watches
        self.watch_versions: list[str | None] = []

    async def current_generation(self) -> int:
        return 0

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def list(self, resource: Resource, namespace: str | None, **_: Any) -> dict[str, Any]:
        items = self.listings.pop(0)
        top = max((int(i["metadata"]["resourceVersion"]) for i in items), default=1)
        return {"metadata": {"resourceVersion": str(top)}, "items": items}

    async def watch(
        self, resource: Resource, namespace: str | None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_versions.append(kwargs.get("resource_version"))
        if not self.watches:
            await asyncio.Event().wait()  # a watch that stays open with nothing to say
        script = self.watches.pop(0)
        for step in script:
            if isinstance(step, Exception):
                raise step
            yield step


async def settle(informer: Informer, api: ScriptedApi) -> None:
    for _ in range(200):
        if not api.watches and not api.listings:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


async def test_gone_relists_and_reports_what_was_missed() -> None:
    events: list[tuple[str, str]] = []
    api = ScriptedApi(
        listings=[[cm("a", 1), cm("b", 2)], [cm("a", 5, changed="yes"), cm("c", 6)]],
        watches=[[ApiError(410, "Expired", "too old resource version")]],
    )
    informer = Informer(
        api,  # type: ignore[arg-type]
        CONFIGMAPS,
        on_event=lambda kind, old, new: events.append((kind, (new or old)["metadata"]["name"])),
    )
    await informer.start()
    await settle(informer, api)
    await informer.stop()
    assert events == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("DELETED", "b"),  # deleted while the watch was gone
        ("MODIFIED", "a"),
        ("ADDED", "c"),
    ]
    assert informer.relists == 2


async def test_bookmarks_move_the_resume_point(monkeypatch: Any) -> None:
    monkeypatch.setattr(informer_module, "BACKOFF_START", 0.01)
    api = ScriptedApi(
        listings=[[cm("a", 1)]],
        watches=[
            [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}}],
            [ApiError(500, "InternalError", "etcd hiccup")],
        ],
    )
    informer = Informer(api, CONFIGMAPS)  # type: ignore[arg-type]
    await informer.start()
    await settle(informer, api)
    await informer.stop()
    # Resumed from the bookmark, and after the error without relisting.
    assert api.watch_versions[:3] == ["1", "42", "42"]
    assert informer.relists == 1


async def test_remember_never_replaces_a_newer_copy() -> None:
    api = ScriptedApi(listings=[[cm("a", 7, v="new")]], watches=[])
    informer = Informer(api, CONFIGMAPS)  # type: ignore[arg-type]
    await informer.start()
    await informer.wait_synced()
    informer.remember(cm("a", 3, v="old"))
    assert informer.get("ns", "a")["data"] == {"v": "new"}
    informer.remember(cm("a", 9, v="written"))
    assert informer.get("ns", "a")["data"] == {"v": "written"}
    await informer.stop()


async def test_a_remembered_write_still_reaches_listeners_as_a_change() -> None:
    """The proxy's read-your-writes must not make the watch event look like a no-op."""
    events: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = []
    api = ScriptedApi(
        listings=[[cm("a", 1, v="before")]],
        watches=[[{"type": "MODIFIED", "object": cm("a", 2, v="after")}]],
    )
    informer = Informer(
        api,  # type: ignore[arg-type]
        CONFIGMAPS,
        on_event=lambda kind, old, new: events.append((kind, old, new)),
    )
    informer.remember(cm("a", 2, v="after"))  # a run wrote it; the watch has not said so yet
    await informer.start()
    await settle(informer, api)
    await informer.stop()
    kind, old, new = events[-1]
    assert kind == "MODIFIED"
    assert old is not None and old["data"] == {"v": "before"}
    assert new is not None and new["data"] == {"v": "after"}


async def test_a_deleted_object_is_gone_from_reads_at_once() -> None:
    api = ScriptedApi(listings=[[cm("a", 1)]], watches=[])
    informer = Informer(api, CONFIGMAPS)  # type: ignore[arg-type]
    await informer.start()
    await informer.wait_synced()
    informer.remember(cm("a", 2), deleted=True)
    assert informer.get("ns", "a") is None
    assert informer.list("ns") == []
    await informer.stop()


async def test_a_long_list_lets_the_event_loop_run_and_answers_as_list() -> None:
    many = [cm(f"cm-{index:04d}", index + 1, n=str(index)) for index in range(1000)]
    for obj in many[::2]:
        obj["metadata"]["labels"] = {"half": "yes"}
    api = ScriptedApi(listings=[many], watches=[])
    informer = Informer(api, CONFIGMAPS)  # type: ignore[arg-type]
    await informer.start()
    await informer.wait_synced()
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    beside = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    started = turns
    listed = await informer.list_yielding("ns", label_selector="half=yes", every=100)
    during = turns - started
    beside.cancel()
    await informer.stop()
    assert listed == informer.list("ns", label_selector="half=yes")
    assert [obj["metadata"]["name"] for obj in listed] == [f"cm-{i:04d}" for i in range(0, 1000, 2)]
    assert during >= 9  # the other task ran between every 100 objects
