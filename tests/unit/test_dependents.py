"""The shared informer cache and the dependent-watch registry on top of it,
against an API in memory: one informer per kind whoever asks, reads only from
what is already watched, and a dependent's change reaching only its owner's queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.types import GVK, Owner, Resource
from ansible_operator.manager.dependents import DependentWatches
from ansible_operator.project.watches import Watch
from ansible_operator.proxy.writes import Write
from ansible_operator.testing.fake_api import FakeApi

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

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


def sent(
    dependents: DependentWatches, resource: Resource, by: Owner, name: str | None = "web"
) -> Write:
    """A run of `by` sends a write of `resource` named `name` (the proxy reports it)."""
    write = Write(resource, by, "team", name)
    dependents.record(write)
    return write


async def wrote(
    dependents: DependentWatches,
    resource: Resource,
    by: Owner,
    written: dict[str, Any] | None = None,
) -> None:
    """A run of `by` wrote an object of `resource`, answered with `written`."""
    name = (written or {}).get("metadata", {}).get("name")
    sent(dependents, resource, by, name).succeeded(written)
    await asyncio.sleep(0)  # the registry hears of the answer on the loop's next turn


async def test_one_informer_per_kind_whoever_asks_and_another_per_label_selector() -> None:
    api = api_holding()
    cache = InformerCache(api, ["team"])

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
    cache = InformerCache(api)
    informer = cache.informer(CONFIGMAPS)
    await informer.wait_synced()
    heard: list[tuple[str, str]] = []

    informer.add_listener(
        lambda kind, old, new, _listed: heard.append((kind, new["metadata"]["name"]))
    )
    api.send(CONFIGMAPS, "MODIFIED", obj("a", rv=2))
    await settle()

    assert heard == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
    await cache.stop()


async def test_reads_come_only_from_a_synced_informer_of_the_whole_kind_and_namespace() -> None:
    api = api_holding(configmaps=[obj("a")], secrets=[obj("s")])
    cache = InformerCache(api, ["team"])

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
    cache = InformerCache(api, ["team"])
    dependents = DependentWatches(cache)
    queued: dict[str, list[ObjectKey]] = {"Memcached": [], "Redis": []}
    dependents.add_owner(watch("Memcached"), queued["Memcached"].append, namespaced=True)
    dependents.add_owner(watch("Redis"), queued["Redis"].append, namespaced=True)

    await wrote(dependents, DEPLOYMENTS, owner("Memcached"))
    await wrote(dependents, DEPLOYMENTS, owner("Memcached", "another"))
    await wrote(dependents, DEPLOYMENTS, owner("Redis", "cache"))
    await cache.wait_synced()
    drifted = obj("web", rv=2, ownerReferences=owned_by("Memcached", "mc"))
    drifted["spec"]["replicas"] = 9
    api.send(DEPLOYMENTS, "MODIFIED", drifted)
    api.send(DEPLOYMENTS, "DELETED", obj("db", rv=3, ownerReferences=owned_by("Redis", "cache")))
    await settle()

    assert api.lists == [("deployments", "team", None)]  # one watch for both owner kinds
    assert queued == {"Memcached": [ObjectKey("team", "mc")], "Redis": [ObjectKey("team", "cache")]}
    await cache.stop()


@pytest.fixture
async def followed() -> AsyncIterator[tuple[FakeApi, DependentWatches, list[ObjectKey]]]:
    """A Deployment "web" of the Memcached "mc", whose kind its runs already wrote."""
    api = api_holding(deployments=[obj("web", ownerReferences=owned_by("Memcached", "mc"))])
    cache = InformerCache(api, ["team"])
    dependents = DependentWatches(cache)
    queued: list[ObjectKey] = []
    dependents.add_owner(watch("Memcached"), queued.append, namespaced=True)
    await wrote(dependents, DEPLOYMENTS, owner("Memcached"))
    await cache.wait_synced()
    yield api, dependents, queued
    await cache.stop()


def web(rv: int, replicas: int) -> dict[str, Any]:
    version = obj("web", rv=rv, ownerReferences=owned_by("Memcached", "mc"))
    version["spec"]["replicas"] = replicas
    return version


async def test_a_runs_own_write_does_not_run_its_owner_again_when_its_event_comes_first(
    followed: tuple[FakeApi, DependentWatches, list[ObjectKey]],
) -> None:
    api, dependents, queued = followed
    write = sent(dependents, DEPLOYMENTS, owner("Memcached"))
    api.send(DEPLOYMENTS, "MODIFIED", web(rv=2, replicas=3))  # before the answer
    await settle()
    assert queued == []  # held while the write is in flight

    write.succeeded(web(rv=2, replicas=3))
    await settle()
    assert queued == []  # and then known as its own run's write


async def test_a_runs_own_write_does_not_run_its_owner_again_when_its_answer_comes_first(
    followed: tuple[FakeApi, DependentWatches, list[ObjectKey]],
) -> None:
    api, dependents, queued = followed
    await wrote(dependents, DEPLOYMENTS, owner("Memcached"), web(rv=2, replicas=3))
    api.send(DEPLOYMENTS, "MODIFIED", web(rv=2, replicas=3))
    await settle()
    assert queued == []


async def test_any_other_change_reruns_the_owner_at_once(
    followed: tuple[FakeApi, DependentWatches, list[ObjectKey]],
) -> None:
    api, dependents, queued = followed
    await wrote(dependents, DEPLOYMENTS, owner("Memcached"), web(rv=2, replicas=3))
    api.send(DEPLOYMENTS, "MODIFIED", web(rv=2, replicas=3))
    api.send(DEPLOYMENTS, "MODIFIED", web(rv=3, replicas=9))  # a drift, after the run's write
    await settle()
    assert queued == [ObjectKey("team", "mc")]

    # A write of the object by another owner's run is no reason to spare "mc";
    # nor is one of "mc"'s writes in flight to another object.
    sent(dependents, DEPLOYMENTS, owner("Memcached"), name="db")
    by_another = sent(dependents, DEPLOYMENTS, owner("Memcached", "another"))
    api.send(DEPLOYMENTS, "MODIFIED", web(rv=4, replicas=4))
    await settle()
    assert queued == [ObjectKey("team", "mc")] * 2
    by_another.succeeded(web(rv=4, replicas=4))


async def test_a_change_held_for_a_write_that_fails_reruns_the_owner(
    followed: tuple[FakeApi, DependentWatches, list[ObjectKey]],
) -> None:
    api, dependents, queued = followed
    write = sent(dependents, DEPLOYMENTS, owner("Memcached"))
    api.send(DEPLOYMENTS, "MODIFIED", web(rv=5, replicas=5))  # someone else's, meanwhile
    await settle()
    assert queued == []

    write.failed()  # refused (a conflict, say), or the run went away
    await settle()
    assert queued == [ObjectKey("team", "mc")]


async def test_a_written_kind_already_watched_as_a_primary_is_not_listed_again() -> None:
    api = api_holding(configmaps=[obj("settings", ownerReferences=owned_by("Memcached", "mc"))])
    cache = InformerCache(api, ["team"])
    cache.informer(CONFIGMAPS)  # a watch of ConfigMaps
    await cache.wait_synced()
    dependents = DependentWatches(cache)
    queued: list[ObjectKey] = []
    dependents.add_owner(watch("Memcached"), queued.append, namespaced=True)

    await wrote(dependents, CONFIGMAPS, owner("Memcached"))
    api.send(
        CONFIGMAPS, "DELETED", obj("settings", rv=3, ownerReferences=owned_by("Memcached", "mc"))
    )
    await settle()

    assert api.lists == [("configmaps", "team", None)]
    assert queued == [ObjectKey("team", "mc")]  # and the objects it held were no reason to run
    await cache.stop()


async def test_writes_that_get_no_dependent_watch() -> None:
    api = api_holding()
    cache = InformerCache(api, ["team"])
    dependents = DependentWatches(cache)
    dependents.add_owner(
        watch("Memcached", blacklist=(GVK("", "v1", "Secret"),)), lambda key: None, namespaced=True
    )
    dependents.add_owner(
        watch("Quiet", watch_dependent_resources=False), lambda key: None, namespaced=True
    )

    await wrote(dependents, SECRETS, owner("Memcached"))  # blacklisted
    await wrote(dependents, DEPLOYMENTS, owner("Quiet"))  # watchDependentResources: false
    await wrote(dependents, DEPLOYMENTS, owner("Unknown"))  # no watch of that kind
    await settle()

    assert api.lists == []
    assert not cache.has(SECRETS) and not cache.has(DEPLOYMENTS)


async def test_a_blacklisted_kind_is_never_read_from_the_cache_by_that_watchs_runs() -> None:
    cache = InformerCache(FakeApi(), ["team"])
    dependents = DependentWatches(cache)
    dependents.add_owner(
        watch("Memcached", blacklist=(GVK("", "v1", "Secret"),)), lambda key: None, namespaced=True
    )
    dependents.add_owner(watch("Redis"), lambda key: None, namespaced=True)

    assert not dependents.reads_cached(SECRETS, owner("Memcached"))
    assert dependents.reads_cached(CONFIGMAPS, owner("Memcached"))
    assert dependents.reads_cached(SECRETS, owner("Redis"))


SA = "system:serviceaccount:ops:op"
FORBIDDEN_LIST = (
    f'configmaps is forbidden: User "{SA}" cannot list resource "configmaps" in API group "" '
    'in the namespace "team"'
)


async def test_a_kind_we_may_not_watch_is_told_to_its_writers_until_we_may() -> None:
    """The run succeeded, but its ConfigMaps' drift would go unseen: the owners whose
    runs wrote the kind run again and hear what was refused; once a list succeeds,
    they run again and hear nothing."""
    from ansible_operator.kube.client import ApiError
    from ansible_operator.runner.rbac_refusal import RbacRefusal

    api = api_holding()
    refusing = True

    def refuse(resource: Resource, body: dict[str, Any]) -> None:
        if refusing and resource.plural == "configmaps":
            raise ApiError(403, "Forbidden", FORBIDDEN_LIST)

    api.before("list", refuse)
    cache = InformerCache(api, ["team"])
    dependents = DependentWatches(cache)
    queued: list[ObjectKey] = []
    dependents.add_owner(watch("Memcached"), queued.append, namespaced=True)

    await wrote(dependents, CONFIGMAPS, owner("Memcached"))
    await settle()

    refused = RbacRefusal(SA, "list", "", "configmaps", "team")
    assert queued == [ObjectKey("team", "mc")]
    assert dependents.refused_watches(owner("Memcached")) == [refused]
    assert dependents.refused_watches(owner("Memcached", "other")) == []

    refusing = False  # role.yaml fixed and applied: the informer's next list succeeds
    await cache.wait_synced()
    await settle()

    assert queued == [ObjectKey("team", "mc")] * 2
    assert dependents.refused_watches(owner("Memcached")) == []
    await cache.stop()
