"""A replica's share as the informers see it (sharding/scope.py): objects of
namespaces outside the share are never held; a share that grows relists and
announces what it brings; one that shrinks forgets without a DELETED (the
objects were not deleted: another replica has them) and, when the server
filters, watches with the smaller selector."""

from __future__ import annotations

import asyncio
from typing import Any

from ansible_operator.kube.informer import Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.types import Resource
from ansible_operator.sharding.buckets import bucket_of, shard_selector
from ansible_operator.sharding.scope import ShardedScope
from ansible_operator.testing.fake_api import FakeApi

WIDGETS = Resource("example.com", "v1", "Widget", "widgets", True)
# Two namespaces of different buckets (FNV-1a barely mixes the last characters
# of a name: team-a and team-b share one).
NAMESPACES = ("billing", "payments")
assert bucket_of(NAMESPACES[0]) != bucket_of(NAMESPACES[1])


def _widget(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {}}


class Heard:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.left: list[str] = []

    def __call__(self, kind: str, old: Any, new: Any) -> None:
        obj = new or old
        self.events.append((kind, f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"))

    def namespace_entered(self, namespace: str) -> None:
        return None

    def namespace_left(self, namespace: str) -> None:
        self.left.append(namespace)


async def _until(condition: Any) -> None:
    async with asyncio.timeout(5):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


async def _started(server_side: bool) -> tuple[FakeApi, ShardedScope, Informer, Heard]:
    api = FakeApi()
    for namespace in NAMESPACES:
        api.put(WIDGETS, _widget(namespace, "w"))
    scope = ShardedScope(NamespaceScope())
    scope.server_side = server_side
    scope.set_active({bucket_of(NAMESPACES[0])})
    heard = Heard()
    scope.add_listener(heard)
    informer = Informer(api, WIDGETS, scope=scope, on_event=heard)  # type: ignore[arg-type]
    await informer.start()
    await informer.wait_synced()
    return api, scope, informer, heard


async def test_only_the_share_is_held_and_a_grown_share_is_announced() -> None:
    api, scope, informer, heard = await _started(server_side=False)
    assert informer.get("billing", "w") is not None
    assert informer.get("payments", "w") is None
    assert scope.owns("billing") and not scope.owns("payments")

    scope.set_active({bucket_of(ns) for ns in NAMESPACES})
    # Until the relist has brought its objects, the proxy reads the new namespace
    # from the server, not from a store that does not hold it yet.
    assert not informer.covers("payments")
    await _until(lambda: informer.get("payments", "w") is not None)
    await _until(lambda: informer.covers("payments"))
    assert ("ADDED", "payments/w") in heard.events
    assert all(kind == "ADDED" for kind, _ in heard.events)
    assert api.shard_selectors == [None, None]  # the server does not filter: everything listed
    await informer.stop()


async def test_a_shrunk_share_is_forgotten_without_a_deletion() -> None:
    _api, scope, informer, heard = await _started(server_side=False)
    scope.set_active(())
    assert informer.get("billing", "w") is None
    assert heard.left == ["billing"]  # the controllers drop its queued keys
    assert not any(kind == "DELETED" for kind, _ in heard.events)
    await informer.stop()


async def test_the_server_is_asked_for_the_share_and_then_for_less() -> None:
    api, scope, informer, _heard = await _started(server_side=True)
    assert api.shard_selectors == [shard_selector({bucket_of("billing")})]
    both = {bucket_of(ns) for ns in NAMESPACES}
    scope.set_active(both)
    await _until(lambda: len(api.shard_selectors) == 2)
    assert api.shard_selectors[1] == shard_selector(both)
    scope.set_active({bucket_of("payments")})
    await _until(lambda: len(api.shard_selectors) == 3)
    assert api.shard_selectors[2] == shard_selector({bucket_of("payments")})
    await informer.stop()


async def test_cluster_scoped_objects_are_announced_when_their_bucket_arrives() -> None:
    from ansible_operator.manager.manager import _AnnounceClusterScopedOnGain

    api = FakeApi()
    nodes = Resource("example.com", "v1", "Gadget", "gadgets", False)
    api.put(nodes, {"metadata": {"name": "g1"}, "spec": {}})
    scope = ShardedScope(NamespaceScope())
    informer = Informer(api, nodes, scope=scope)  # type: ignore[arg-type]
    await informer.start()
    await informer.wait_synced()
    announced: list[tuple[str, str]] = []
    announce = _AnnounceClusterScopedOnGain()
    announce.kinds.append(
        (informer, lambda kind, _old, new: announced.append((kind, new["metadata"]["name"])))
    )
    scope.add_listener(announce)

    scope.set_active({bucket_of("billing")} - {bucket_of("")})
    assert announced == []  # not the bucket every cluster-scoped object hashes to
    scope.set_active({bucket_of("")})
    assert announced == [("ADDED", "g1")]
    await informer.stop()
