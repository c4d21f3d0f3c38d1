"""The shared informer cache and the dependent-watch registry on top of it,
against an API in memory: one informer per kind whoever asks, reads only from
what is already watched, and a dependent's change reaching only its owner's queue."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ansible_operator.controller.dependents import DependentWatches
from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.types import GVK, Owner, Resource
from ansible_operator.testing.fake_api import FakeApi
from ansible_operator.watches import Watch

CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)
DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments", True)
SECRETS = Resource("", "v1", "Secret", "secrets", True)


def obj(name: str, namespace: str = "team", rv: int = 1, **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv), **metadata},
        "spec": {"replicas": 1},
    }


def api_holding(**objects: list[dict[str, Any]]) -> FakeApi:
    """An API holding `objects` by plural."""
    api = FakeApi()
    resources = {r.plural: r for r in (CONFIGMAPS, DEPLOYMENTS, SECRETS)}
    for plural, items in objects.items():
        for item in items:
            api.put(resources[plural], item)
    return api


def watch(kind: str, **settings: Any) -> Watch:
    return Watch(
        gvk=GVK("cache.example.com", "v1alpha1", kind),
        role=Path("roles/x"),
        playbook=None,
        vars={},
        **settings,
    )


def owner(kind: str, name: str = "mc") -> Owner:
    return Owner("cache.example.com", "v1alpha1", kind, "team", name, "uid-" + name)


def owned_by(kind: str, name: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": kind,
            "name": name,
            "uid": "uid-" + name,
            "controller": True,
        }
    ]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_one_informer_per_kind_whoever_asks_and_another_per_label_selector() -> None:
    api = api_holding()
    cache = InformerCache(api, ["team"])  # type: ignore[arg-type]

    first = cache.informer(CONFIGMAPS)
    assert cache.informer(CONFIGMAPS) is first
    filtered = cache.informer(CONFIGMAPS, label_selector="tier=web")
    await cache.wait_synced()

    assert filtered is not first
    assert len(api.lists) == 2
    assert set(api.lists) == {("configmaps", "team", None), ("configmaps", "team", "tier=web")}
    await cache.stop()


async def test_a_listener_added_late_first_hears_every_object_already_held() -> None:
    api = api_holding(configmaps=[obj("a"), obj("b")])
    cache = InformerCache(api)  # type: ignore[arg-type]
    informer = cache.informer(CONFIGMAPS)
    await informer.wait_synced()
    heard: list[tuple[str, str]] = []

    informer.add_listener(lambda kind, old, new: heard.append((kind, new["metadata"]["name"])))
    api.send(CONFIGMAPS, "MODIFIED", obj("a", rv=2))
    await settle()

    assert heard == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
    await cache.stop()


async def test_reads_come_only_from_a_synced_informer_of_the_whole_kind_and_namespace() -> None:
    api = api_holding(configmaps=[obj("a")], secrets=[obj("s")])
    cache = InformerCache(api, ["team"])  # type: ignore[arg-type]

    assert cache.view(CONFIGMAPS, "team") is None  # nothing watches it: never starts a watch
    assert api.lists == []
    cache.informer(CONFIGMAPS)
    cache.informer(SECRETS, label_selector="app=x")
    await cache.wait_synced()

    view = cache.view(CONFIGMAPS, "team")
    assert view is not None and view.get("team", "a") is not None
    assert cache.view(CONFIGMAPS, "elsewhere") is None  # not a namespace it holds
    assert cache.view(CONFIGMAPS, None) is None  # nor all of them
    assert cache.view(SECRETS, "team") is None  # a label selector: not the whole kind
    await cache.stop()


async def test_a_written_kind_is_watched_once_and_its_changes_reach_only_their_owner() -> None:
    api = api_holding(
        deployments=[
            obj("web", ownerReferences=owned_by("Memcached", "mc")),
            obj("db", ownerReferences=owned_by("Redis", "cache")),
        ]
    )
    cache = InformerCache(api, ["team"])  # type: ignore[arg-type]
    dependents = DependentWatches(cache, own_write_wait=0.0)
    queued: dict[str, list[ObjectKey]] = {"Memcached": [], "Redis": []}
    dependents.add_owner(watch("Memcached"), queued["Memcached"].append, namespaced=True)
    dependents.add_owner(watch("Redis"), queued["Redis"].append, namespaced=True)

    dependents.on_write(DEPLOYMENTS, owner("Memcached"))
    dependents.on_write(DEPLOYMENTS, owner("Memcached", "another"))
    dependents.on_write(DEPLOYMENTS, owner("Redis", "cache"))
    await cache.wait_synced()
    drifted = obj("web", rv=2, ownerReferences=owned_by("Memcached", "mc"))
    drifted["spec"]["replicas"] = 9
    api.send(DEPLOYMENTS, "MODIFIED", drifted)
    api.send(DEPLOYMENTS, "DELETED", obj("db", rv=3, ownerReferences=owned_by("Redis", "cache")))
    await settle()

    assert api.lists == [("deployments", "team", None)]  # one watch for both owner kinds
    assert queued == {"Memcached": [ObjectKey("team", "mc")], "Redis": [ObjectKey("team", "cache")]}
    await cache.stop()


async def test_a_runs_own_write_does_not_run_its_owner_again_but_any_later_change_does() -> None:
    mine = owned_by("Memcached", "mc")
    api = api_holding(deployments=[obj("web", ownerReferences=mine)])
    cache = InformerCache(api, ["team"])  # type: ignore[arg-type]
    dependents = DependentWatches(cache, own_write_wait=0.0)
    queued: list[ObjectKey] = []
    dependents.add_owner(watch("Memcached"), queued.append, namespaced=True)
    dependents.on_write(DEPLOYMENTS, owner("Memcached"))
    await cache.wait_synced()

    written = obj("web", rv=2, ownerReferences=mine)
    written["spec"]["replicas"] = 3
    # The run of "mc" wrote it; the proxy hands over what the write returned,
    # here a moment after the change event came.
    dependents.own_write_wait = 0.1
    api.send(DEPLOYMENTS, "MODIFIED", written)
    await asyncio.sleep(0.02)
    dependents.on_write(DEPLOYMENTS, owner("Memcached"), written)
    await asyncio.sleep(0.2)
    assert queued == []  # its own run's write

    drifted = obj("web", rv=3, ownerReferences=mine)
    drifted["spec"]["replicas"] = 9  # someone else's change, after the run's
    api.send(DEPLOYMENTS, "MODIFIED", drifted)
    # A write by the run of another object of the kind is no reason to spare "mc".
    by_another = obj("web", rv=4, ownerReferences=mine)
    by_another["spec"]["replicas"] = 4
    dependents.on_write(DEPLOYMENTS, owner("Memcached", "another"), by_another)
    api.send(DEPLOYMENTS, "MODIFIED", by_another)
    await asyncio.sleep(0.3)
    assert queued == [ObjectKey("team", "mc")] * 2
    await cache.stop()


async def test_a_written_kind_already_watched_as_a_primary_is_not_listed_again() -> None:
    api = api_holding(configmaps=[obj("settings", ownerReferences=owned_by("Memcached", "mc"))])
    cache = InformerCache(api, ["team"])  # type: ignore[arg-type]
    cache.informer(CONFIGMAPS)  # a watch of ConfigMaps
    await cache.wait_synced()
    dependents = DependentWatches(cache, own_write_wait=0.0)
    queued: list[ObjectKey] = []
    dependents.add_owner(watch("Memcached"), queued.append, namespaced=True)

    dependents.on_write(CONFIGMAPS, owner("Memcached"))
    api.send(
        CONFIGMAPS, "DELETED", obj("settings", rv=3, ownerReferences=owned_by("Memcached", "mc"))
    )
    await settle()

    assert api.lists == [("configmaps", "team", None)]
    assert queued == [ObjectKey("team", "mc")]  # and the objects it held were no reason to run
    await cache.stop()


async def test_writes_that_get_no_dependent_watch() -> None:
    api = api_holding()
    cache = InformerCache(api, ["team"])  # type: ignore[arg-type]
    dependents = DependentWatches(cache, own_write_wait=0.0)
    dependents.add_owner(
        watch("Memcached", blacklist=(GVK("", "v1", "Secret"),)), lambda key: None, namespaced=True
    )
    dependents.add_owner(
        watch("Quiet", watch_dependent_resources=False), lambda key: None, namespaced=True
    )

    dependents.on_write(SECRETS, owner("Memcached"))  # blacklisted
    dependents.on_write(DEPLOYMENTS, owner("Quiet"))  # watchDependentResources: false
    dependents.on_write(DEPLOYMENTS, owner("Unknown"))  # no watch of that kind
    await settle()

    assert api.lists == []
    assert not cache.has(SECRETS) and not cache.has(DEPLOYMENTS)


async def test_a_blacklisted_kind_is_never_read_from_the_cache_by_that_watchs_runs() -> None:
    cache = InformerCache(api_holding(), ["team"])  # type: ignore[arg-type]
    dependents = DependentWatches(cache, own_write_wait=0.0)
    dependents.add_owner(
        watch("Memcached", blacklist=(GVK("", "v1", "Secret"),)), lambda key: None, namespaced=True
    )
    dependents.add_owner(watch("Redis"), lambda key: None, namespaced=True)

    assert not dependents.reads_cached(SECRETS, owner("Memcached"))
    assert dependents.reads_cached(CONFIGMAPS, owner("Memcached"))
    assert dependents.reads_cached(SECRETS, owner("Redis"))
