"""The API proxy in-process against the real API server: authentication,
owner injection, cached reads, streaming, discovery of new kinds."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import load_config
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.proxy.server import ApiProxy
from ansible_operator.proxy.writes import Write
from ansible_operator.testing.manifests import apply_manifests, schemaless_crd

pytestmark = pytest.mark.cluster


class Registry:
    """A dependent registry that keeps every write the proxy reports."""

    def __init__(self) -> None:
        self.reported: list[Write] = []

    def record(self, write: Write) -> None:
        self.reported.append(write)

    def reads_cached(self, resource: Resource, owner: Owner) -> bool:
        return True

    @property
    def writes(self) -> list[tuple[str, str]]:
        """(kind, owner name) of the writes that happened."""
        return [(w.resource.kind, w.owner.name) for w in self.reported if w.happened]


@dataclass
class Harness:
    proxy: ApiProxy
    api: ApiClient
    owner: Owner
    token: str
    revoke: Any
    url: str
    namespace: str
    registry: Registry

    @property
    def writes(self) -> list[tuple[str, str]]:
        return self.registry.writes

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}


@pytest.fixture
async def harness(kube_cluster: Cluster, kube_namespace: str) -> AsyncIterator[Harness]:
    config = load_config(kube_cluster.kubeconfig)
    async with ApiClient(config) as api:
        mapper = RestMapper(api)
        configmaps = await mapper.resource_for("", "v1", "ConfigMap")
        # The operator's cache: the ConfigMaps of the test's namespace.
        cache = InformerCache(api, [kube_namespace])
        await cache.informer(configmaps).wait_synced()
        registry = Registry()
        proxy = ApiProxy(config, mapper, cache=cache, port=0, dependents=registry)
        port = await proxy.start()
        # The owner must exist for garbage collection to make sense; a ConfigMap will do.
        owner_obj = await api.create(
            configmaps, {"metadata": {"name": "the-owner"}}, kube_namespace
        )
        owner = Owner(
            "", "v1", "ConfigMap", kube_namespace, "the-owner", owner_obj["metadata"]["uid"]
        )
        access = proxy.grant(owner)
        token = access.kubeconfig["users"][0]["user"]["token"]
        try:
            yield Harness(
                proxy,
                api,
                owner,
                token,
                access.revoke,
                f"http://127.0.0.1:{port}",
                kube_namespace,
                registry,
            )
        finally:
            await proxy.stop()
            await cache.stop()


async def request(
    method: str,
    url: str,
    headers: dict[str, str],
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, str], Any]:
    async with aiohttp.ClientSession() as session:
        data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
        if data is not None:
            headers = {**headers, "Content-Type": content_type}
        async with session.request(method, url, headers=headers, data=data) as response:
            text = await response.text()
            try:
                payload = json.loads(text)
            except ValueError:
                payload = text
            return response.status, dict(response.headers), payload


async def test_proxy_listens_on_loopback_and_refuses_strangers(harness: Harness) -> None:
    path = f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps"
    assert (await request("GET", path, {}))[0] == 401
    assert (await request("GET", path, harness.auth("forged-token")))[0] == 401
    status, _, body = await request("GET", path, {"Authorization": "Basic eyJ9"})
    assert status == 401 and body["reason"] == "Unauthorized"
    assert (await request("GET", path, harness.auth()))[0] == 200
    harness.revoke()
    assert (await request("GET", path, harness.auth()))[0] == 401  # the run has ended
    assert harness.proxy.bound_port is not None
    with pytest.raises(aiohttp.ClientConnectorError):
        await request("GET", f"http://127.0.0.2:{harness.proxy.bound_port}/version", {})


async def test_create_gets_controller_reference_and_starts_a_dependent_watch(
    harness: Harness,
) -> None:
    status, _, created = await request(
        "POST",
        f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps",
        harness.auth(),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "child"},
            "data": {"a": "1"},
        },
    )
    assert status == 201, created
    assert created["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "the-owner",
            "uid": harness.owner.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert harness.writes == [("ConfigMap", "the-owner")]
    # Settled before the run got the answer, with the version it made: the
    # registry can tell the change event of this write from any later one.
    [write] = harness.registry.reported
    assert (write.namespace, write.name) == (harness.namespace, None)  # a create
    assert write.object is not None
    assert write.object["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_write_the_server_refuses_is_reported_as_not_done(harness: Harness) -> None:
    path = f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps"
    assert (await request("POST", path, harness.auth(), {"metadata": {"name": "once"}}))[0] == 201
    status, _, _ = await request("POST", path, harness.auth(), {"metadata": {"name": "once"}})
    assert status == 409
    merge = "application/merge-patch+json"
    patch = {"data": {"a": "1"}}
    status, _, _ = await request("PATCH", f"{path}/once", harness.auth(), patch, merge)
    assert status == 200

    created, refused, patched = harness.registry.reported
    assert created.happened and not refused.happened and refused.settled
    assert (patched.namespace, patched.name) == (harness.namespace, "once")
    assert patched.happened


async def test_put_and_merge_patch_cannot_drop_our_reference(harness: Harness) -> None:
    base = f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps"
    _, _, created = await request(
        "POST",
        base,
        harness.auth(),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}},
    )
    replaced = dict(created)
    replaced["metadata"] = {k: v for k, v in created["metadata"].items() if k != "ownerReferences"}
    replaced["data"] = {"b": "2"}
    status, _, body = await request("PUT", f"{base}/kept", harness.auth(), replaced)
    assert status == 200, body
    assert [r["uid"] for r in body["metadata"]["ownerReferences"]] == [harness.owner.uid]
    status, _, body = await request(
        "PATCH",
        f"{base}/kept",
        harness.auth(),
        {"metadata": {"ownerReferences": None}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, body
    assert [r["uid"] for r in body["metadata"]["ownerReferences"]] == [harness.owner.uid]


async def test_server_side_apply_gets_the_reference(harness: Harness) -> None:
    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n"
        f"  namespace: {harness.namespace}\ndata:\n  how: ssa\n"
    )
    status, _, body = await request(
        "PATCH",
        f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps/applied"
        "?fieldManager=test&force=true",
        harness.auth(),
        manifest,
        content_type="application/apply-patch+yaml",
    )
    assert status in (200, 201), body
    assert [r["uid"] for r in body["metadata"]["ownerReferences"]] == [harness.owner.uid]


async def test_replace_apply_and_patch_never_adopt_an_object_made_by_hand(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A person's ConfigMap, replaced, applied and patched by a run, stays
    unowned: owning it would let the garbage collector delete it with the
    custom object."""
    configmaps = await RestMapper(harness.api).resource_for("", "v1", "ConfigMap")
    base = f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps"
    made = await harness.api.create(
        configmaps, {"metadata": {"name": "by-hand"}, "data": {"who": "person"}}, harness.namespace
    )
    replaced = {**made, "data": {"who": "run"}}
    status, _, body = await request("PUT", f"{base}/by-hand", harness.auth(), replaced)
    assert status == 200, body
    assert "ownerReferences" not in body["metadata"]
    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: by-hand\n"
        f"  namespace: {harness.namespace}\ndata:\n  how: ssa\n"
    )
    status, _, body = await request(
        "PATCH",
        f"{base}/by-hand?fieldManager=test&force=true",
        harness.auth(),
        manifest,
        content_type="application/apply-patch+yaml",
    )
    assert status == 200, body
    assert "ownerReferences" not in body["metadata"]
    status, _, body = await request(
        "PATCH",
        f"{base}/by-hand",
        harness.auth(),
        {"metadata": {"ownerReferences": None}, "data": {"patched": "yes"}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, body
    assert "ownerReferences" not in body["metadata"]
    stored = await harness.api.get(configmaps, "by-hand", harness.namespace)
    assert "ownerReferences" not in stored["metadata"]
    assert stored["data"] == {"who": "run", "how": "ssa", "patched": "yes"}
    assert any(
        "left unowned" in record.getMessage() and "name=by-hand" in record.getMessage()
        for record in caplog.records
    ), [record.getMessage() for record in caplog.records]


async def test_apply_that_creates_and_apply_again_keep_our_reference(harness: Harness) -> None:
    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied-twice\n"
        f"  namespace: {harness.namespace}\ndata:\n  round: '{{n}}'\n"
    )
    url = (
        f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps/applied-twice"
        "?fieldManager=test&force=true"
    )
    for round_number in (1, 2):
        status, _, body = await request(
            "PATCH",
            url,
            harness.auth(),
            manifest.replace("{n}", str(round_number)),
            content_type="application/apply-patch+yaml",
        )
        assert status in (200, 201), body
        # The second apply's manifest has no ownerReferences either: without ours
        # added again, server-side apply would remove the one the first added.
        assert [r["uid"] for r in body["metadata"]["ownerReferences"]] == [harness.owner.uid]
        assert body["data"]["round"] == str(round_number)


async def test_reads_of_a_cached_kind_come_from_the_cache_with_selectors(
    harness: Harness,
) -> None:
    base = f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps"
    for name, tier in (("web", "front"), ("db", "back"), ("cache", "back")):
        await request(
            "POST",
            base,
            harness.auth(),
            {"metadata": {"name": name, "labels": {"tier": tier, "app": "shop"}}},
        )
    status, headers, body = await request("GET", f"{base}/web", harness.auth())
    assert status == 200 and headers.get("X-Cache") == "HIT"  # read-your-writes
    assert body["kind"] == "ConfigMap" and body["metadata"]["name"] == "web"

    async def names(query: str) -> tuple[set[str], str | None]:
        _, hdrs, listed = await request("GET", f"{base}?{query}", harness.auth())
        return {item["metadata"]["name"] for item in listed["items"]}, hdrs.get("X-Cache")

    assert await names("labelSelector=tier%3Dback") == ({"db", "cache"}, "HIT")
    assert await names("labelSelector=tier+in+%28front%29") == ({"web"}, "HIT")
    assert await names("labelSelector=app%2C%21missing") == ({"web", "db", "cache"}, "HIT")
    assert await names("fieldSelector=metadata.name%3Ddb") == ({"db"}, "HIT")

    # other kinds and other namespaces are forwarded to the server
    _, headers, _ = await request(
        "GET", f"{harness.url}/api/v1/namespaces/{harness.namespace}/secrets", harness.auth()
    )
    assert "X-Cache" not in headers
    _, headers, _ = await request("GET", f"{harness.url}/api/v1/configmaps", harness.auth())
    assert "X-Cache" not in headers


async def test_watch_responses_stream_through_the_proxy(harness: Harness) -> None:
    url = (
        f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps?watch=1&timeoutSeconds=20"
    )
    async with aiohttp.ClientSession() as session, session.get(url, headers=harness.auth()) as w:
        assert w.status == 200
        first = json.loads(await asyncio.wait_for(w.content.readline(), 10))
        assert first["type"] == "ADDED"
        await request(
            "POST",
            f"{harness.url}/api/v1/namespaces/{harness.namespace}/configmaps",
            harness.auth(),
            {"metadata": {"name": "late"}},
        )
        while True:
            event = json.loads(await asyncio.wait_for(w.content.readline(), 10))
            if event["object"]["metadata"]["name"] == "late":
                break
        assert event["type"] == "ADDED"


async def test_a_crd_created_a_moment_ago_works_at_once(
    harness: Harness, kube_api: client.ApiClient
) -> None:
    plural = f"gadgets{uuid.uuid4().hex[:6]}"
    group = "proxy.test.example.com"
    apply_manifests(kube_api, json.dumps(schemaless_crd(group, "Gadget" + plural[7:], plural)))
    try:
        status, _, body = await request(
            "POST",
            f"{harness.url}/apis/{group}/v1/namespaces/{harness.namespace}/{plural}",
            harness.auth(),
            {"apiVersion": f"{group}/v1", "kind": "Gadget" + plural[7:], "metadata": {"name": "g"}},
        )
        assert status == 201, body
        assert body["metadata"]["ownerReferences"][0]["uid"] == harness.owner.uid
        assert ("Gadget" + plural[7:], "the-owner") in harness.writes
    finally:
        client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(f"{plural}.{group}")


async def test_an_unavailable_aggregated_api_breaks_nothing_else(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    registration = client.ApiregistrationV1Api(kube_api)
    name = "v1beta1.metrics.k8s.io"
    registration.create_api_service(
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": name},
            "spec": {
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "service": {"namespace": "kube-system", "name": "no-such-metrics-server"},
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
            },
        }
    )
    try:
        async with ApiClient(load_config(kube_cluster.kubeconfig)) as api:
            mapper = RestMapper(api)
            configmaps = await mapper.resource_for_plural("", "v1", "configmaps")
            assert configmaps.kind == "ConfigMap"
            deployments = await mapper.resource_for("apps", "v1", "Deployment")
            assert deployments.plural == "deployments"
    finally:
        registration.delete_api_service(name)
