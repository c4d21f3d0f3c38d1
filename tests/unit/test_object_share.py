"""A replica's share as the informers see it (kube/object_share.py, kube/informer.py):
only the share's objects are held, by their uid, or for dependents by their
owner's label; the server is asked for the share where it filters (and every
object else, the rest dropped and counted); a grown share is relisted and
announced, a shrunk one forgotten without a DELETED (another replica has its
objects), its keys told to whoever keeps state per object."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.kube.shard_keys import (
    OWNER_SHARD_LABEL,
    bucket_of_key,
    owner_shard_selector,
    shard_selector,
)
from ansible_operator.kube.types import Resource
from ansible_operator.testing.fake_api import FakeApi

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

WIDGETS = Resource("example.com", "v1", "Widget", "widgets", True)
GADGETS = Resource("example.com", "v1", "Gadget", "gadgets", False)  # cluster-scoped
CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)


def _uids_in_two_buckets() -> tuple[str, str]:
    first = str(uuid.UUID(int=1, version=4))
    index = 2
    while bucket_of_key(second := str(uuid.UUID(int=index, version=4))) == bucket_of_key(first):
        index += 1
    return first, second


UID_A, UID_B = _uids_in_two_buckets()
A, B = bucket_of_key(UID_A), bucket_of_key(UID_B)


def _widget(name: str, uid: str, namespace: str | None = "team-001") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": uid}
    if namespace:
        metadata["namespace"] = namespace
    return {"metadata": metadata, "spec": {}}


def _dependent(name: str, owner_bucket: int | None) -> dict[str, Any]:
    labels = {} if owner_bucket is None else {OWNER_SHARD_LABEL: str(owner_bucket)}
    return {"metadata": {"name": name, "namespace": "shared", "labels": labels}, "data": {}}


class Heard:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.forgotten: list[tuple[str, str]] = []

    def __call__(self, kind: str, old: Any, new: Any, _listed: bool) -> None:
        self.events.append((kind, (new or old)["metadata"]["name"]))


async def _until(condition: Any) -> None:
    async with asyncio.timeout(5):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


async def _started(
    api: FakeApi, resource: Resource, share: ObjectShare, follows: Any = "self"
) -> tuple[Informer, Heard]:
    heard = Heard()
    informer = Informer(
        api,
        resource,
        scope=NamespaceScope(),
        on_event=heard,
        share=share,
        follows=follows,
    )
    informer.add_forget_listener(heard.forgotten.extend)
    await informer.start()
    await informer.wait_synced()
    return informer, heard


def _two_widgets(api: FakeApi) -> None:
    api.put(WIDGETS, _widget("a", UID_A))  # one namespace, two buckets
    api.put(WIDGETS, _widget("b", UID_B))


async def test_only_the_share_is_held_and_the_rest_dropped_and_counted() -> None:
    api = FakeApi()
    _two_widgets(api)
    informer, heard = await _started(api, WIDGETS, ObjectShare({A}))
    assert informer.get("team-001", "a") is not None
    assert informer.get("team-001", "b") is None
    assert heard.events == [("ADDED", "a")]
    assert (informer.received, informer.dropped) == (2, 1)
    assert api.shard_selectors == [None]  # the server does not filter: everything listed
    # Some of each namespace only: the proxy must not answer a LIST from it.
    assert not informer.covers("team-001") and not informer.covers(None)

    api.send(WIDGETS, "MODIFIED", {**_widget("b", UID_B), "spec": {"x": 1}})
    await _until(lambda: informer.dropped == 2)
    assert informer.get("team-001", "b") is None
    await informer.stop()


async def test_a_grown_share_is_relisted_and_its_objects_announced() -> None:
    api = FakeApi()
    _two_widgets(api)
    share = ObjectShare({A})
    informer, heard = await _started(api, WIDGETS, share)
    share.set_active({A, B})
    await _until(lambda: informer.get("team-001", "b") is not None)
    assert heard.events == [("ADDED", "a"), ("ADDED", "b")]
    await informer.stop()


async def test_a_shrunk_share_is_forgotten_without_a_deletion_and_its_keys_told() -> None:
    api = FakeApi()
    _two_widgets(api)
    share = ObjectShare({A, B})
    informer, heard = await _started(api, WIDGETS, share)
    informer.remember(
        {
            **_widget("b", UID_B),
            "metadata": {**_widget("b", UID_B)["metadata"], "resourceVersion": "99"},
        }
    )
    share.set_active({A})
    assert informer.get("team-001", "b") is None  # neither stored nor remembered
    assert heard.forgotten == [("team-001", "b")]
    assert not any(kind == "DELETED" for kind, _ in heard.events)
    assert informer.holds("team-001", "a") and not informer.holds("team-001", "b")
    await informer.stop()


async def test_a_write_of_another_share_is_not_remembered() -> None:
    api = FakeApi()
    informer, _heard = await _started(api, WIDGETS, ObjectShare({A}))
    written = _widget("b", UID_B)
    written["metadata"]["resourceVersion"] = "5"
    informer.remember(written)
    assert informer.get("team-001", "b") is None
    assert informer.dropped == 0  # not sent by the server: nothing dropped
    await informer.stop()


async def test_the_server_is_asked_for_the_share_and_then_for_less() -> None:
    api = FakeApi()
    _two_widgets(api)
    share = ObjectShare({A})
    share.server_side = True
    informer, _heard = await _started(api, WIDGETS, share)
    assert api.shard_selectors == [shard_selector({A})]
    share.set_active({A, B})
    await _until(lambda: len(api.shard_selectors) == 2)
    assert api.shard_selectors[1] == shard_selector({A, B})
    share.set_active({B})
    await _until(lambda: len(api.shard_selectors) == 3)
    assert api.shard_selectors[2] == shard_selector({B})
    await informer.stop()


async def test_a_cluster_scoped_kind_is_shared_by_uid_too() -> None:
    api = FakeApi()
    api.put(GADGETS, _widget("g1", UID_A, namespace=None))
    api.put(GADGETS, _widget("g2", UID_B, namespace=None))
    share = ObjectShare({B})
    informer, heard = await _started(api, GADGETS, share)
    assert heard.events == [("ADDED", "g2")]
    share.set_active({A, B})
    await _until(lambda: informer.get(None, "g1") is not None)
    assert heard.events[-1] == ("ADDED", "g1")
    await informer.stop()


async def test_dependents_are_watched_by_their_owner_s_label_on_any_server() -> None:
    api = FakeApi()
    api.put(CONFIGMAPS, _dependent("of-a", A))
    api.put(CONFIGMAPS, _dependent("of-b", B))
    api.put(CONFIGMAPS, _dependent("unlabelled", None))
    share = ObjectShare({A})  # server_side False: labels are filtered by every server
    informer, heard = await _started(api, CONFIGMAPS, share, follows="owner")
    assert api.lists[-1] == ("configmaps", None, owner_shard_selector({A}))
    assert heard.events == [("ADDED", "of-a")]
    assert informer.dropped == 0  # the server sent only the share

    share.set_active({A, B})
    await _until(lambda: informer.get("shared", "of-b") is not None)
    assert api.lists[-1] == ("configmaps", None, owner_shard_selector({A, B}))
    assert informer.get("shared", "unlabelled") is None

    # Relabelled to another replica's owner: forgotten here, not deleted.
    share.set_active({B})
    api.send(CONFIGMAPS, "MODIFIED", _dependent("of-b", A))
    await _until(lambda: informer.get("shared", "of-b") is None)
    assert not any(kind == "DELETED" for kind, _ in heard.events)
    await informer.stop()


async def test_the_proxy_reads_a_share_s_objects_but_never_lists_from_it() -> None:
    api = FakeApi()
    _two_widgets(api)
    share = ObjectShare({A})
    cache = InformerCache(api, share=share)
    primary = cache.informer(WIDGETS)
    dependents = cache.informer(WIDGETS, follows="owner")
    assert primary is not dependents  # one kind, keyed two ways
    await cache.wait_synced()
    view = cache.view(WIDGETS, "team-001")
    assert view is not None and not view.complete
    assert view.get("team-001", "a") is not None
    assert view.get("team-001", "b") is None  # another replica's: the proxy forwards
    await cache.stop()
