"""The namespaces an operator watches (kube/namespace_scope.py,
kube/namespace_selection.py) and how the informers keep to them: a long list
watched once across the cluster and filtered here, a 403 falling back to a
watch per namespace, namespaces chosen by label entering and leaving."""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from typing import Any

import pytest

from ansible_operator.controller.queue import WorkQueue
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.informer import CLUSTER_WIDE_ABOVE, DISPATCH_BATCH, Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.namespace_selection import NAMESPACES, SelectedNamespaces
from ansible_operator.kube.selectors import SelectorError, check_label_selector
from ansible_operator.kube.types import Resource
from ansible_operator.settings.watching import namespace_selector
from ansible_operator.testing.fake_api import FakeApi

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)
MANY = [f"team-{n:02d}" for n in range(CLUSTER_WIDE_ABOVE + 2)]


def cm(namespace: str, name: str = "c") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": {}}


def ns(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


class Heard:
    """What an informer's listener heard: (event, namespace, name)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def __call__(
        self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None, _listed: bool
    ) -> None:
        metadata = (new or old or {})["metadata"]
        self.events.append((kind, metadata["namespace"], metadata["name"]))

    def namespaces(self) -> set[str]:
        return {namespace for _, namespace, _ in self.events}


async def until(condition: Any, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.01)


# ----- the scope itself ------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def namespace_entered(self, namespace: str) -> None:
        self.seen.append(("entered", namespace))

    def namespace_left(self, namespace: str) -> None:
        self.seen.append(("left", namespace))


def test_a_fixed_scope_holds_its_namespaces_and_cluster_scoped_objects() -> None:
    scope = NamespaceScope(["a", "b"])
    assert scope.contains("a") and scope.contains("") and scope.contains(None)
    assert not scope.contains("c")
    assert not scope.every and not scope.dynamic
    assert NamespaceScope().every and NamespaceScope().contains("anything")


def test_listeners_hear_each_namespace_enter_and_leave_once() -> None:
    scope = NamespaceScope(["a"])
    recorder = Recorder()
    scope.add_listener(recorder)
    scope.enter("b")
    scope.enter("b")
    scope.leave("a")
    scope.leave("a")
    scope.leave("never-in")
    assert recorder.seen == [("entered", "b"), ("left", "a")]


def test_many_namespaces_are_counted_in_log_lines() -> None:
    described = NamespaceScope([f"n{i:03d}" for i in range(600)]).describe()
    assert described.endswith("(600 namespaces)") and len(described) < 200


# ----- selectors ------------------------------------------------------------------
@pytest.mark.parametrize("selector", ["team=a", "team=a,env in (prod, dev)", "!legacy", "x!=y"])
def test_label_selectors_the_server_takes_pass(selector: str) -> None:
    check_label_selector(selector)


@pytest.mark.parametrize("selector", ["", "team=a b", "te$m=a", "env in prod", "team=-a-"])
def test_label_selectors_the_server_refuses_are_refused(selector: str) -> None:
    with pytest.raises(SelectorError):
        check_label_selector(selector)


def test_a_bad_namespace_selector_says_what_a_selector_looks_like() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"not a label selector.*team=a"):
        namespace_selector("team==a b")


# ----- many namespaces: one watch across the cluster, filtered here ---------------
async def test_a_long_list_is_one_cluster_wide_list_whose_other_namespaces_never_arrive() -> None:
    api = FakeApi()
    for namespace in [*MANY, "elsewhere"]:
        api.put(CONFIGMAPS, cm(namespace))
    heard = Heard()
    informer = Informer(api, CONFIGMAPS, scope=NamespaceScope(MANY), on_event=heard)
    await informer.start()
    await informer.wait_synced()
    api.send(
        CONFIGMAPS,
        "ADDED",
        {
            **cm("elsewhere", "late"),
            "metadata": {"name": "late", "namespace": "elsewhere", "resourceVersion": "900"},
        },
    )
    api.send(
        CONFIGMAPS,
        "ADDED",
        {"metadata": {"name": "late", "namespace": MANY[0], "resourceVersion": "901"}},
    )
    await until(lambda: ("ADDED", MANY[0], "late") in heard.events)
    informer.remember(
        {"metadata": {"name": "w", "namespace": "elsewhere", "resourceVersion": "950"}}
    )
    await informer.stop()

    assert api.lists == [("configmaps", None, None)]  # one list, not one per namespace
    assert heard.namespaces() == set(MANY)
    assert informer.get("elsewhere", "c") is None and informer.get("elsewhere", "w") is None
    assert {obj["metadata"]["namespace"] for obj in informer.list()} == set(MANY)
    assert informer.covers(MANY[0]) and not informer.covers("elsewhere")
    assert not informer.covers(None)  # a read of every namespace goes to the server


async def test_a_short_list_is_listed_namespace_by_namespace() -> None:
    api = FakeApi()
    for namespace in ("a", "b", "elsewhere"):
        api.put(CONFIGMAPS, cm(namespace))
    informer = Informer(api, CONFIGMAPS, scope=NamespaceScope(["a", "b"]))
    await informer.start()
    await informer.wait_synced()
    await informer.stop()
    assert sorted(api.lists) == [("configmaps", "a", None), ("configmaps", "b", None)]
    assert {obj["metadata"]["namespace"] for obj in informer.list()} == {"a", "b"}


class NamespacedOnly(FakeApi):
    """RBAC granted in each namespace, not across the cluster."""

    async def list(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Any:
        if namespace is None and resource.namespaced:
            self.lists.append((resource.plural, None, "refused"))
            raise ApiError(403, "Forbidden", "configmaps is forbidden at the cluster scope")
        return await super().list(resource, namespace, **kw)


async def test_a_refused_cluster_wide_list_falls_back_to_each_namespace_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "ansible_operator.informer")
    api = NamespacedOnly()
    for namespace in [*MANY, "elsewhere"]:
        api.put(CONFIGMAPS, cm(namespace))
    heard = Heard()
    informer = Informer(api, CONFIGMAPS, scope=NamespaceScope(MANY), on_event=heard)
    await informer.start()
    await asyncio.wait_for(informer.wait_synced(), 5)
    await informer.stop()
    assert heard.namespaces() == set(MANY)
    assert informer.covers(MANY[-1])
    refusals = [r for r in caplog.records if "cluster-wide list refused" in r.getMessage()]
    assert len(refusals) == 1


# ----- namespaces chosen by label -------------------------------------------------
async def selected(api: FakeApi, selector: str = "team=a") -> SelectedNamespaces:
    scope = SelectedNamespaces(api, selector)
    await scope.start()
    await scope.wait_synced()
    return scope


async def test_a_namespace_relabelled_out_is_forgotten_without_a_deletion() -> None:
    api = FakeApi()
    api.put(NAMESPACES, ns("in", team="a"))
    api.put(NAMESPACES, ns("stays", team="a"))
    api.put(NAMESPACES, ns("out", team="b"))
    for namespace in ("in", "stays", "out"):
        api.put(CONFIGMAPS, cm(namespace))
    scope = await selected(api)
    cache = InformerCache(api, scope)
    heard = Heard()
    informer = cache.informer(CONFIGMAPS)
    informer.add_listener(heard)
    await cache.wait_synced()
    assert sorted(heard.events) == [("ADDED", "in", "c"), ("ADDED", "stays", "c")]
    heard.events.clear()

    # The API server's label-selected watch says DELETED when labels stop matching.
    api.send(NAMESPACES, "DELETED", ns("in", team="gone"))
    await until(lambda: not scope.contains("in"))
    assert informer.get("in", "c") is None and len(informer) == 1
    assert not informer.covers("in") and cache.view(CONFIGMAPS, "in") is None
    # Its objects' later changes do not arrive either (the watch is in order:
    # once the change in "stays" is heard, the one in "in" was dropped).
    for namespace in ("in", "stays"):
        api.send(
            CONFIGMAPS,
            "MODIFIED",
            {"metadata": {"name": "c", "namespace": namespace, "resourceVersion": "999"}},
        )
    await until(lambda: heard.events)
    await cache.stop()
    await scope.stop()
    assert heard.events == [("MODIFIED", "stays", "c")]  # no DELETED of "in", nothing after
    assert informer.get("in", "c") is None


async def test_a_namespace_relabelled_in_is_listed_and_its_objects_announced() -> None:
    api = FakeApi()
    api.put(NAMESPACES, ns("in", team="a"))
    api.put(CONFIGMAPS, cm("later"))
    scope = await selected(api)
    cache = InformerCache(api, scope)
    heard = Heard()
    informer = cache.informer(CONFIGMAPS)
    informer.add_listener(heard)
    await cache.wait_synced()
    assert heard.events == []

    api.send(NAMESPACES, "ADDED", ns("later", team="a"))
    await until(lambda: ("ADDED", "later", "c") in heard.events)
    assert informer.covers("later")
    await cache.stop()
    await scope.stop()
    assert ("configmaps", "later", None) in api.lists


# ----- a thundering herd at start -------------------------------------------------
async def test_ten_thousand_listed_objects_leave_the_event_loop_free_while_announced() -> None:
    api = FakeApi()
    for number in range(10_000):
        api.put(CONFIGMAPS, cm("big", f"c{number}"))
    queue: WorkQueue[tuple[str, str]] = WorkQueue()
    informer = Informer(
        api,
        CONFIGMAPS,
        on_event=lambda _kind, _old, new, _listed: queue.add(
            (new["metadata"]["namespace"], new["metadata"]["name"])  # type: ignore[index]
        ),
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await informer.start()
    await informer.wait_synced()
    ticking.cancel()
    await informer.stop()
    assert len(queue) == 10_000
    # The loop ran other work between batches, not once after all 10,000.
    assert ticks >= 10_000 // DISPATCH_BATCH - 2


async def test_the_queue_takes_ten_thousand_initial_adds_cheaply() -> None:
    queue: WorkQueue[int] = WorkQueue()
    started = time.process_time()
    for item in range(10_000):
        queue.add(item)
    for item in range(10_000):  # a relist's duplicates are dropped
        queue.add(item)
    assert len(queue) == 10_000
    assert time.process_time() - started < 2.0  # well under: tens of milliseconds


async def test_forgetting_drops_queued_scheduled_and_follow_up_keys_only() -> None:
    queue: WorkQueue[tuple[str, str]] = WorkQueue()
    queue.add(("gone", "running"))
    assert await queue.get() == ("gone", "running")
    queue.add(("gone", "queued"))
    queue.add(("kept", "queued"))
    queue.add_after(("gone", "scheduled"), 30)
    queue.add(("gone", "running"))  # a change during its run: a follow-up is due
    dropped = queue.discard_where(lambda key: key[0] == "gone")
    queue.done(("gone", "running"))  # the run in flight finishes, no follow-up
    assert dropped == 2
    assert queue.pending_delay(("gone", "scheduled")) is None
    assert [await queue.get() for _ in range(len(queue))] == [("kept", "queued")]
