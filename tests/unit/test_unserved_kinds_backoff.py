"""Kinds the API server does not serve yet are looked for again on a backoff (10s,
doubling, at most 5 minutes), one discovery per look whatever their number; one that
appears is watched, and the backoff starts over. On looptime's fake clock, the looks'
times are exact: this is the schedule the fault suite once watched for 75 real seconds."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, cast

import pytest
from fake_clock import elapse

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import GVK, Resource
from ansible_operator.manager.unserved import FIRST_LOOK, LONGEST_LOOK, UnservedKinds
from ansible_operator.project.watches import Watch

pytestmark = pytest.mark.looptime

GROUP = "absent.example.com"


class DiscoveryServer:
    """The discovery endpoints of an API server whose served kinds a test changes,
    recording when each discovery began (on the loop's clock)."""

    def __init__(self) -> None:
        self.served: set[str] = set()
        self.looks: list[float] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert method == "GET"
        if path == "/api":
            self.looks.append(asyncio.get_running_loop().time())
            return {"versions": []}
        if path == "/apis":
            return {"groups": [{"name": GROUP, "versions": [{"version": "v1"}]}]}
        assert path == f"/apis/{GROUP}/v1"
        return {
            "resources": [
                {"name": kind.lower() + "s", "kind": kind, "namespaced": True, "verbs": ["list"]}
                for kind in sorted(self.served)
            ]
        }


def watch(kind: str) -> Watch:
    return Watch(gvk=GVK(GROUP, "v1", kind), role=Path("roles/r"), playbook=None, vars={})


class Scene:
    def __init__(self, kinds: int) -> None:
        self.server = DiscoveryServer()
        self.mapper = RestMapper(cast(ApiClient, self.server))
        self.started: list[tuple[str, float]] = []
        self.unserved = UnservedKinds(
            self.mapper, [watch(f"Absent{i}") for i in range(kinds)], self.start_watch
        )

    async def start_watch(self, watch: Watch, resource: Resource) -> None:
        assert resource.kind == watch.gvk.kind
        self.started.append((resource.kind, asyncio.get_running_loop().time()))


def doubling_until(end: float) -> list[float]:
    """The looks' times since the start when nothing appears: 10, 30, 70, ... capped."""
    times, at, delay = [], 0.0, FIRST_LOOK
    while at + delay <= end:
        at += delay
        times.append(at)
        delay = min(delay * 2, LONGEST_LOOK)
    return times


async def test_five_hundred_unserved_kinds_cost_one_discovery_per_look_on_a_backoff() -> None:
    scene = Scene(kinds=500)
    start = asyncio.get_running_loop().time()
    task = asyncio.create_task(scene.unserved.run())
    await elapse(3600)
    task.cancel()
    looks = [round(at - start, 3) for at in scene.server.looks]
    assert looks == doubling_until(3600)
    assert looks[:5] == [10, 30, 70, 150, 310]
    assert looks[-1] - looks[-2] == LONGEST_LOOK
    assert scene.started == []


async def test_a_kind_that_appears_is_watched_at_the_next_look_and_the_backoff_starts_over() -> (
    None
):
    scene = Scene(kinds=3)
    start = asyncio.get_running_loop().time()
    task = asyncio.create_task(scene.unserved.run())
    await elapse(40)  # looks at 10 and 30; the next is due at 70
    scene.server.served.add("Absent1")
    await elapse(101)
    assert [(kind, round(at - start, 3)) for kind, at in scene.started] == [("Absent1", 70)]
    # After an appearance: 10s again (CRDs arrive together), then doubling.
    assert [round(at - start, 3) for at in scene.server.looks] == [10, 30, 70, 80, 100, 140]
    assert [w.gvk.kind for w in scene.unserved.waiting] == ["Absent0", "Absent2"]
    task.cancel()


async def test_a_discovery_made_meanwhile_is_used_at_once() -> None:
    scene = Scene(kinds=2)
    start = asyncio.get_running_loop().time()
    task = asyncio.create_task(scene.unserved.run())
    await elapse(12)
    scene.server.served.add("Absent0")
    # A run asks the proxy about a kind it has never seen: the mapper discovers.
    await scene.mapper.refresh()
    await asyncio.sleep(0.1)
    assert [(kind, round(at - start, 3)) for kind, at in scene.started] == [("Absent0", 12)]
    task.cancel()


async def test_the_last_kind_appearing_ends_the_looks() -> None:
    scene = Scene(kinds=1)
    task = asyncio.create_task(scene.unserved.run())
    scene.server.served.add("Absent0")
    await asyncio.wait_for(task, timeout=60)
    assert len(scene.server.looks) == 1


def test_each_unserved_kind_is_reported_once_naming_it_and_the_first_look(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scene = Scene(kinds=3)
    with caplog.at_level(logging.WARNING, logger="ansible_operator.manager"):
        scene.unserved.report()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    for i, line in enumerate(lines):
        assert line.startswith(f"not watching kind=Absent{i} group={GROUP} version=v1:")
        assert "looking again in 10s" in line
