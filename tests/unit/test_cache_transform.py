"""What the informer keeps of each object (kube/transform.py): the store and
its listeners hold one copy without managedFields and the last-applied
annotation; every read (the reconciler's, the proxy's) gets the object back as
the API server sent it; and the memory held is reported as it comes and goes."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.transform import LAST_APPLIED, restore, strip, transform
from ansible_operator.kube.types import Resource
from ansible_operator.observability.metrics import Metrics
from ansible_operator.testing.fake_api import FakeApi
from ansible_operator.testing.metrics import metric_value

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


def test_strip_drops_managed_fields_and_last_applied_and_restore_gives_them_back() -> None:
    served = as_served("w", team="blue")
    kept = copy.deepcopy(served)
    removed = strip(kept)
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["annotations"] == {"team": "blue"}
    assert restore(kept, removed) == served


def test_an_object_whose_only_annotation_was_last_applied_comes_back_the_same() -> None:
    served = as_served("w")
    kept = copy.deepcopy(served)
    removed = strip(kept)
    assert "annotations" not in kept["metadata"]
    assert restore(kept, removed) == served


def test_an_object_with_nothing_to_drop_is_kept_whole() -> None:
    plain = {"metadata": {"name": "w", "annotations": {"a": "b"}}, "data": {"k": "v"}}
    kept = copy.deepcopy(plain)
    assert strip(kept) is None
    assert kept == plain and restore(kept, None) is kept


async def fed(api: FakeApi, *objects: dict[str, Any]) -> tuple[Informer, list[Any]]:
    for obj in objects:
        api.put(WIDGETS, obj)
    heard: list[Any] = []
    informer = Informer(api, WIDGETS, on_event=lambda kind, old, new: heard.append(new))  # type: ignore[arg-type]
    await informer.start()
    await informer.wait_synced()
    return informer, heard


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_listeners_share_the_stored_copy_and_reads_get_the_object_as_served() -> None:
    api = FakeApi()
    informer, heard = await fed(api, as_served("listed"))
    api.send(WIDGETS, "ADDED", as_served("watched", rv=2))
    await settle()

    for name in ("listed", "watched"):
        held = next(obj for obj in heard if obj["metadata"]["name"] == name)
        assert "managedFields" not in held["metadata"]
        assert LAST_APPLIED not in held["metadata"].get("annotations", {})
        assert informer._store[("team", name)] is held  # one copy, not one per reader
        read = informer.get("team", name)
        assert read is not None
        assert read["metadata"]["managedFields"][0]["manager"] == "kubectl-client-side-apply"
        assert LAST_APPLIED in read["metadata"]["annotations"]
    assert [obj["metadata"]["managedFields"] for obj in informer.list("team")] == [
        as_served("x")["metadata"]["managedFields"]
    ] * 2
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
    cache = InformerCache(api, ["team"])  # type: ignore[arg-type]
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
    # What the store holds of a stripped Widget: hundreds of bytes, not kilobytes.
    assert 200 < held / objects < 2000

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

    kept, removed, size = transform(obj)
    read = restore(kept, removed)

    assert size > levels * 64  # every level counted
    assert _depth(read["spec"], "a") == levels
    assert read["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert _depth(read["metadata"]["managedFields"][0]["fieldsV1"], "f:a") == levels
