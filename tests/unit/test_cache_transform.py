"""What the informer keeps of each object (kube/transform.py): the object
packed; listeners hear the objects as served; every read (the reconciler's,
the proxy's) gets its own copy of the object as the API server sent it; and
the memory held is reported as it comes and goes."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.transform import hold
from ansible_operator.kube.types import Resource
from ansible_operator.observability.metrics import Metrics
from ansible_operator.testing.fake_api import FakeApi
from ansible_operator.testing.metrics import metric_value

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
WIDGETS = Resource("example.com", "v1", "Widget", "widgets", True)
INFORMER = "example.com/v1/widgets"


def as_served(name: str, rv: int = 1, **annotations: str) -> dict[str, Any]:
    """A Widget as the API server returns it after `kubectl apply`."""
    applied = {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 2}}
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": name,
            "namespace": "team",
            "resourceVersion": str(rv),
            "annotations": {LAST_APPLIED: json.dumps(applied), **annotations},
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {".": {}, "f:size": {}}},
                }
            ],
        },
        "spec": {"size": 2},
        "status": {"conditions": [{"type": "Successful", "status": "True"}]},
    }


def test_an_object_is_held_packed_and_read_back_as_served() -> None:
    served = as_served("w", team="blue")
    held = hold(copy.deepcopy(served))
    assert held.whole is None and held.packed is not None
    assert held.version == 1
    assert held.unpack() == served
    assert held.unpack() is not held.unpack()  # each read its own copy
    # Packed, it is smaller than its own JSON; the estimate counts the bytes and more.
    assert held.packed is not None and len(held.packed) < len(json.dumps(served))
    assert held.size > len(held.packed)


async def fed(api: FakeApi, *objects: dict[str, Any]) -> tuple[Informer, list[Any]]:
    for obj in objects:
        api.put(WIDGETS, obj)
    heard: list[Any] = []
    informer = Informer(api, WIDGETS, on_event=lambda kind, old, new, _listed: heard.append(new))
    await informer.start()
    await informer.wait_synced()
    return informer, heard


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_listeners_and_reads_get_the_object_as_served_each_its_own_copy() -> None:
    api = FakeApi()
    informer, heard = await fed(api, as_served("listed"))
    api.send(WIDGETS, "ADDED", as_served("watched", rv=2))
    await settle()

    for name in ("listed", "watched"):
        told = next(obj for obj in heard if obj["metadata"]["name"] == name)
        assert told["metadata"]["managedFields"][0]["manager"] == "kubectl-client-side-apply"
        read = informer.get("team", name)
        assert read is not None
        assert read == told
        read["spec"]["size"] = 99  # a reader that changes its copy changes no one else's
        again = informer.get("team", name)
        assert again is not None and again["spec"]["size"] == 2
        assert LAST_APPLIED in again["metadata"]["annotations"]
    assert [obj["metadata"]["managedFields"] for obj in informer.list("team")] == [
        as_served("x")["metadata"]["managedFields"]
    ] * 2
    await informer.stop()


async def test_a_change_tells_listeners_the_previous_object_as_it_was() -> None:
    api = FakeApi()
    told: list[tuple[str, Any, Any]] = []
    api.put(WIDGETS, as_served("w"))
    informer = Informer(
        api, WIDGETS, on_event=lambda kind, old, new, _listed: told.append((kind, old, new))
    )
    await informer.start()
    await informer.wait_synced()
    changed = as_served("w", rv=2, team="red")
    api.send(WIDGETS, "MODIFIED", changed)
    api.send(WIDGETS, "DELETED", as_served("w", rv=3, team="red"))
    await settle()

    (_, _, listed), (modified, before, after), (deleted, last, gone) = told
    assert (modified, deleted) == ("MODIFIED", "DELETED")
    assert before == listed and before["metadata"]["resourceVersion"] == "1"
    assert after["metadata"]["annotations"]["team"] == "red"
    assert last == after and gone["metadata"]["resourceVersion"] == "3"
    assert informer.get("team", "w") is None
    await informer.stop()


async def test_a_remembered_write_reads_back_whole_and_the_callers_copy_is_untouched() -> None:
    api = FakeApi()
    informer, _ = await fed(api, as_served("w"))
    written = as_served("w", rv=7, team="red")
    answer = copy.deepcopy(written)
    informer.remember(answer)
    assert answer == written
    assert informer.get("team", "w") == written


async def test_a_remembered_write_is_let_go_when_the_watch_delivers_it_unread() -> None:
    api = FakeApi()
    informer, _ = await fed(api, as_served("w"))
    informer.remember(as_served("w", rv=7))
    api.send(WIDGETS, "MODIFIED", as_served("w", rv=7))
    await settle()
    assert informer._written == {}  # no second copy waiting for a read that may never come
    await informer.stop()


async def test_cache_metrics_count_objects_and_bytes_as_they_come_and_go() -> None:
    api = FakeApi()
    for number in range(100):
        api.put(WIDGETS, as_served(f"w{number}"))
    cache = InformerCache(api, ["team"])
    metrics = Metrics()
    metrics.track_cache(cache.held)
    informer = cache.informer(WIDGETS)
    await informer.wait_synced()

    def scraped() -> tuple[float, float]:
        exposition = metrics.exposition().decode()
        return (
            metric_value(exposition, "ansible_operator_cache_objects", informer=INFORMER),
            metric_value(exposition, "ansible_operator_cache_bytes", informer=INFORMER),
        )

    objects, held = scraped()
    assert objects == 100
    # What the store holds of a packed Widget: hundreds of bytes, not kilobytes.
    assert 200 < held / objects < 1000

    for number in range(50):
        api.send(WIDGETS, "DELETED", as_served(f"w{number}", rv=1000 + number))
    await settle()
    objects, after = scraped()
    assert objects == 50
    assert 0.4 * held < after < 0.6 * held
    for number in range(50, 100):
        api.send(WIDGETS, "DELETED", as_served(f"w{number}", rv=2000 + number))
    await settle()
    assert scraped() == (0, 0)
    await cache.stop()


def _depth(value: dict[str, Any], key: str) -> int:
    depth = 0
    while key in value:
        value, depth = value[key], depth + 1
    return depth


def test_an_object_deeper_than_the_interpreter_recurses_is_stored_and_read_back() -> None:
    """Whoever writes a custom object chooses its depth (the API server takes
    thousands of levels; a RecursionError here would fail the kind's watch)."""
    levels = 3000
    deep: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    spec, managed = deep, fields
    for _ in range(levels):
        spec["a"], managed["f:a"] = {}, {}
        spec, managed = spec["a"], managed["f:a"]
    obj = {
        "metadata": {
            "name": "deep",
            "namespace": "ns",
            "managedFields": [{"manager": "kubectl", "fieldsV1": fields}],
        },
        "spec": deep,
    }

    held = hold(obj)
    read = held.unpack()

    if held.whole is None:  # the encoder went that deep (Python 3.12+): packed
        assert held.packed is not None and held.size > len(held.packed)
    else:  # kept as it came, every level counted
        assert held.size > levels * 64
    assert _depth(read["spec"], "a") == levels
    assert read["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert _depth(read["metadata"]["managedFields"][0]["fieldsV1"], "f:a") == levels
