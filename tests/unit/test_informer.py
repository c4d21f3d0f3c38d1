"""The informer's recovery paths, against the fake API (the happy path runs against the
real API server in tests/integration/test_kube_client.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ansible_operator.kube import informer as informer_module
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.types import Resource
from ansible_operator.testing.fake_api import FakeApi

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)


def cm(name: str, version: int, **data: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)},
        "data": data,
    }


def holding(*objects: dict[str, Any]) -> FakeApi:
    api = FakeApi()
    for obj in objects:
        api.put(CONFIGMAPS, obj)
    return api


async def watching(informer: Informer, api: FakeApi, watches: int) -> None:
    """Until the informer has begun its `watches`-th watch (a relist or a resume
    included): what it does after a watch ended is done."""
    for _ in range(1000):
        if len(api.watch_versions) >= watches:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(api.watch_versions)} watches began, {watches} expected")


async def test_gone_relists_and_reports_what_was_missed() -> None:
    events: list[tuple[str, str]] = []
    api = holding(cm("a", 1), cm("b", 2))
    informer = Informer(
        api,
        CONFIGMAPS,
        on_event=lambda kind, old, new, _listed: events.append(
            (kind, (new or old)["metadata"]["name"])
        ),
    )
    await informer.start()
    await watching(informer, api, 1)
    # While the watch is gone its history goes too: b deleted, a changed, c made.
    del api.objects[(CONFIGMAPS.plural, "ns", "b")]
    api.put(CONFIGMAPS, cm("a", 5, changed="yes"))
    api.put(CONFIGMAPS, cm("c", 6))
    api.end_watch(CONFIGMAPS, ApiError(410, "Expired", "too old resource version"))
    await watching(informer, api, 2)
    await informer.stop()
    assert events == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("DELETED", "b"),  # deleted while the watch was gone
        ("MODIFIED", "a"),
        ("ADDED", "c"),
    ]
    assert informer.relists == 2


async def test_events_say_whether_a_list_or_the_watch_brought_them() -> None:
    heard: list[tuple[str, str, bool]] = []
    api = holding(cm("a", 1))
    informer = Informer(
        api,
        CONFIGMAPS,
        on_event=lambda kind, old, new, listed: heard.append(
            (kind, (new or old)["metadata"]["name"], listed)
        ),
    )
    await informer.start()
    await watching(informer, api, 1)
    api.send(CONFIGMAPS, "ADDED", cm("b", 2))
    api.send(CONFIGMAPS, "MODIFIED", cm("a", 3))
    late: list[tuple[str, str, bool]] = []
    for _ in range(1000):  # until the informer has taken both events
        if len(heard) == 3:
            break
        await asyncio.sleep(0.01)
    informer.add_listener(
        lambda kind, old, new, listed: late.append((kind, (new or old)["metadata"]["name"], listed))
    )
    await informer.stop()
    assert heard == [("ADDED", "a", True), ("ADDED", "b", False), ("MODIFIED", "a", False)]
    assert sorted(late) == [("ADDED", "a", True), ("ADDED", "b", True)]  # the replay: listed


async def test_bookmarks_move_the_resume_point(monkeypatch: Any) -> None:
    monkeypatch.setattr(informer_module, "BACKOFF_START", 0.01)
    api = holding(cm("a", 1))
    informer = Informer(api, CONFIGMAPS)
    await informer.start()
    await watching(informer, api, 1)
    api.send(CONFIGMAPS, "BOOKMARK", {"metadata": {"resourceVersion": "42"}})
    api.end_watch(CONFIGMAPS)  # as the server ends a watch after its timeout
    await watching(informer, api, 2)
    api.end_watch(CONFIGMAPS, ApiError(500, "InternalError", "etcd hiccup"))
    await watching(informer, api, 3)
    await informer.stop()
    # Resumed from the bookmark, and after the error without relisting.
    assert api.watch_versions[:3] == ["1", "42", "42"]
    assert informer.relists == 1


async def test_remember_never_replaces_a_newer_copy() -> None:
    api = holding(cm("a", 7, v="new"))
    informer = Informer(api, CONFIGMAPS)
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
    api = holding(cm("a", 1, v="before"))
    informer = Informer(
        api,
        CONFIGMAPS,
        on_event=lambda kind, old, new, _listed: events.append((kind, old, new)),
    )
    informer.remember(cm("a", 2, v="after"))  # a run wrote it; the watch has not said so yet
    await informer.start()
    await watching(informer, api, 1)
    api.send(CONFIGMAPS, "MODIFIED", cm("a", 2, v="after"))
    for _ in range(1000):  # until the informer has taken the event
        if events and events[-1][0] == "MODIFIED":
            break
        await asyncio.sleep(0.01)
    await informer.stop()
    kind, old, new = events[-1]
    assert kind == "MODIFIED"
    assert old is not None and old["data"] == {"v": "before"}
    assert new is not None and new["data"] == {"v": "after"}


async def test_a_deleted_object_is_gone_from_reads_at_once() -> None:
    api = holding(cm("a", 1))
    informer = Informer(api, CONFIGMAPS)
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
    api = holding(*many)
    informer = Informer(api, CONFIGMAPS)
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
