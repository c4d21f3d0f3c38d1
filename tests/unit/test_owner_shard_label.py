"""In a shard ring, what a run marks as its owner's also gets the owner's shard
label (proxy/rules/owner_marks.py), by which the owner's replica watches its
dependents: on a create, and on a merge patch of an object that carries our
mark without the label (made before the ring); never on an object not ours,
and never without a ring."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from ansible_operator.kube.shard_keys import OWNER_SHARD_LABEL, bucket_of_key
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.proxy.exchange import Exchange, Services
from ansible_operator.proxy.grants import Grant, Grants
from ansible_operator.proxy.ownership import owner_reference
from ansible_operator.proxy.paths import parse_resource_path
from ansible_operator.proxy.rules.owner_marks import mark_ownership

CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)
OWNER = Owner("cache.example.com", "v1alpha1", "Memcached", "team", "mc", "0d5c9f7e-uid")
LABEL = str(bucket_of_key(OWNER.uid))
COLLECTION = "/api/v1/namespaces/team/configmaps"
ONE = f"{COLLECTION}/settings"
MERGE = {"Content-Type": "application/merge-patch+json"}


class Cached:
    """The operator's cache of ConfigMaps, holding `objects` by name."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {obj["metadata"]["name"]: obj for obj in objects}
        self.complete = False

    def view(self, _resource: Resource, _namespace: str | None) -> Cached:
        return self

    def get(self, _namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get(name)


class Server:
    """The API server's answer to the rule's GET of an object not cached as ours."""

    def __init__(self, obj: dict[str, Any] | None) -> None:
        self.obj = obj
        self.server = "https://api"
        self.session = self
        self.reads = 0

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[Server]:
        yield self

    @contextlib.asynccontextmanager
    async def get(self, _url: str, **_options: Any) -> AsyncIterator[Server]:
        self.reads += 1
        yield self

    @property
    def status(self) -> int:
        return 404 if self.obj is None else 200

    async def json(self, **_options: Any) -> dict[str, Any] | None:
        return self.obj


class Config:
    async def auth_headers(self) -> dict[str, str]:
        return {}


def _exchange(
    method: str,
    path: str,
    body: dict[str, Any],
    *,
    ring: bool = True,
    cache: Cached | None = None,
    server: Server | None = None,
    headers: dict[str, str] | None = None,
) -> Exchange:
    services = Services(
        config=Config(),  # type: ignore[arg-type]
        upstreams=server or Server(None),  # type: ignore[arg-type]
        mapper=None,  # type: ignore[arg-type]
        grants=Grants(),
        cache=cache or Cached(),  # type: ignore[arg-type]
        dependents=None,
        inject_owner_ref=True,
        stats={"injected": 0},
        shard_labels=ring,
    )
    request = make_mocked_request(method, path, headers=headers or {})
    exchange = Exchange(request, services, grant=Grant(OWNER))
    exchange.target = parse_resource_path(path)
    exchange.resource = CONFIGMAPS
    exchange.body = json.dumps(body).encode()
    return exchange


async def _sent(exchange: Exchange) -> dict[str, Any]:
    """The body the rule passes on to the server."""
    sent: dict[str, Any] = {}

    async def pass_on(passed: Exchange) -> web.StreamResponse:
        sent.update(json.loads(passed.body))
        return web.Response()

    await mark_ownership(exchange, pass_on)
    return sent


def _ours(labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "settings",
        "namespace": "team",
        "ownerReferences": [owner_reference(OWNER)],
    }
    if labels is not None:
        metadata["labels"] = labels
    return {"metadata": metadata, "data": {"a": "1"}}


async def test_what_a_run_creates_is_labelled_with_its_owner_s_bucket() -> None:
    sent = await _sent(_exchange("POST", COLLECTION, {"metadata": {"name": "settings"}}))
    assert sent["metadata"]["labels"] == {OWNER_SHARD_LABEL: LABEL}
    assert sent["metadata"]["ownerReferences"] == [owner_reference(OWNER)]


async def test_without_a_ring_nothing_is_labelled() -> None:
    created = {"metadata": {"name": "settings"}}
    sent = await _sent(_exchange("POST", COLLECTION, created, ring=False))
    assert "labels" not in sent["metadata"]


async def test_a_merge_patch_of_our_object_made_before_the_label_adds_it() -> None:
    exchange = _exchange("PATCH", ONE, {"data": {"a": "2"}}, server=Server(_ours()), headers=MERGE)
    sent = await _sent(exchange)
    assert sent == {"data": {"a": "2"}, "metadata": {"labels": {OWNER_SHARD_LABEL: LABEL}}}


async def test_a_merge_patch_of_our_labelled_object_is_left_as_it_came_and_read_from_cache() -> (
    None
):
    server = Server(None)
    labelled = _ours({OWNER_SHARD_LABEL: LABEL})
    exchange = _exchange(
        "PATCH", ONE, {"data": {"a": "2"}}, cache=Cached(labelled), server=server, headers=MERGE
    )
    assert await _sent(exchange) == {"data": {"a": "2"}}
    assert server.reads == 0


async def test_a_merge_patch_of_an_object_not_ours_is_left_alone() -> None:
    theirs = {"metadata": {"name": "settings", "namespace": "team"}, "data": {}}
    exchange = _exchange("PATCH", ONE, {"data": {"a": "2"}}, server=Server(theirs), headers=MERGE)
    assert await _sent(exchange) == {"data": {"a": "2"}}


async def test_a_replace_of_our_object_keeps_the_label_on() -> None:
    replaced = _ours()
    exchange = _exchange("PUT", ONE, replaced, server=Server(_ours()))
    sent = await _sent(exchange)
    assert sent["metadata"]["labels"] == {OWNER_SHARD_LABEL: LABEL}
