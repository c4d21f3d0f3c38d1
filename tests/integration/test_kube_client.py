"""Our asyncio Kubernetes access against the real API server: config,
discovery, CRUD, errors and informers."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from ansible_operator.cluster import Cluster
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import load_config
from ansible_operator.kube.discovery import RestMapper, UnknownResource
from ansible_operator.kube.informer import Informer

pytestmark = pytest.mark.cluster


async def until(check: Any) -> None:
    async with asyncio.timeout(15):
        while not check():  # noqa: ASYNC110 - polls state another task changes
            await asyncio.sleep(0.05)


async def test_crud_and_errors_name_the_problem(kube_cluster: Cluster, kube_namespace: str) -> None:
    config = load_config(kube_cluster.kubeconfig)
    async with ApiClient(config) as api:
        mapper = RestMapper(api)
        configmaps = await mapper.resource_for("", "v1", "ConfigMap")
        assert configmaps.namespaced and configmaps.plural == "configmaps"
        created = await api.create(
            configmaps, {"metadata": {"name": "one"}, "data": {"a": "1"}}, kube_namespace
        )
        assert created["metadata"]["uid"]
        patched = await api.patch(configmaps, "one", {"data": {"b": "2"}}, namespace=kube_namespace)
        assert patched["data"] == {"a": "1", "b": "2"}
        applied = await api.patch(
            configmaps,
            "two",
            {"metadata": {"name": "two"}, "data": {"c": "3"}},
            namespace=kube_namespace,
            patch_type="apply",
            force=True,
        )
        assert applied["data"] == {"c": "3"}
        listed = await api.list(configmaps, kube_namespace)
        assert {item["metadata"]["name"] for item in listed["items"]} >= {"one", "two"}

        with pytest.raises(ApiError) as missing:
            await api.get(configmaps, "nope", kube_namespace)
        assert missing.value.status == 404
        assert "nope" in missing.value.message

        with pytest.raises(ApiError) as conflict:
            await api.replace(
                configmaps,
                "one",
                {"metadata": {"name": "one", "resourceVersion": "1"}, "data": {}},
                kube_namespace,
            )
        assert conflict.value.status == 409

        with pytest.raises(UnknownResource, match=r"Gizmo in example.com/v1"):
            await mapper.resource_for("example.com", "v1", "Gizmo")


async def test_mapper_finds_a_crd_installed_after_start(kube_cluster: Cluster) -> None:
    config = load_config(kube_cluster.kubeconfig)
    group = f"late{uuid.uuid4().hex[:6]}.example.com"
    async with ApiClient(config) as api:
        mapper = RestMapper(api)
        await mapper.resource_for("", "v1", "Pod")  # discovery loaded before the CRD exists
        crds = await mapper.resource_for("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
        await api.create(
            crds,
            {
                "metadata": {"name": f"gadgets.{group}"},
                "spec": {
                    "group": group,
                    "scope": "Cluster",
                    "names": {"plural": "gadgets", "kind": "Gadget"},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "subresources": {"status": {}},
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    ],
                },
            },
        )
        try:
            for _attempt in range(40):
                try:
                    gadgets = await mapper.resource_for(group, "v1", "Gadget")
                    break
                except UnknownResource:
                    await asyncio.sleep(0.5)
            else:
                raise AssertionError("the new CRD never appeared in discovery")
            assert not gadgets.namespaced
            assert "status" in gadgets.subresources
        finally:
            await api.delete(crds, f"gadgets.{group}")


async def test_informer_tracks_changes_and_answers_selectors(
    kube_cluster: Cluster, kube_namespace: str
) -> None:
    config = load_config(kube_cluster.kubeconfig)
    events: list[tuple[str, str]] = []
    async with ApiClient(config) as api:
        configmaps = await RestMapper(api).resource_for("", "v1", "ConfigMap")
        await api.create(
            configmaps,
            {"metadata": {"name": "before", "labels": {"tier": "web"}}},
            kube_namespace,
        )
        informer = Informer(
            api,
            configmaps,
            namespaces=[kube_namespace],
            on_event=lambda kind, old, new, _listed: events.append(
                (kind, (new or old)["metadata"]["name"])
            ),
        )
        await informer.start()
        try:
            await asyncio.wait_for(informer.wait_synced(), 15)
            assert informer.synced
            assert ("ADDED", "before") in events
            await api.create(
                configmaps,
                {"metadata": {"name": "after", "labels": {"tier": "db"}}},
                kube_namespace,
            )
            await until(lambda: informer.get(kube_namespace, "after") is not None)
            await api.patch(configmaps, "after", {"data": {"x": "y"}}, namespace=kube_namespace)
            await until(lambda: ("MODIFIED", "after") in events)
            assert informer.get(kube_namespace, "after")["data"] == {"x": "y"}

            names = [
                o["metadata"]["name"]
                for o in informer.list(kube_namespace, label_selector="tier in (web,db)")
            ]
            assert names == ["after", "before"]
            assert [
                o["metadata"]["name"] for o in informer.list(label_selector="tier!=web,tier")
            ] == ["after"]
            assert [
                o["metadata"]["name"] for o in informer.list(field_selector="metadata.name=before")
            ] == ["before"]

            await api.delete(configmaps, "before", kube_namespace)
            await until(lambda: ("DELETED", "before") in events)
            assert informer.get(kube_namespace, "before") is None
        finally:
            await informer.stop()


async def test_requests_are_answered_beside_more_watches_than_a_pool_holds(
    kube_cluster: Cluster, kube_namespace: str
) -> None:
    """An operator over many namespaces and kinds holds hundreds of watches, each
    a connection for its life: a write made then must still reach the server."""
    config = load_config(kube_cluster.kubeconfig)
    async with ApiClient(config) as api:
        configmaps = await RestMapper(api).resource_for("", "v1", "ConfigMap")
        await api.create(configmaps, {"metadata": {"name": "seen-first"}}, kube_namespace)
        connected = 0

        async def hold_a_watch() -> None:
            nonlocal connected
            # From no resourceVersion the server first sends what exists
            # (seen-first): the watch's connection is up, and stays held as an
            # informer's does.
            counted = False
            async for event in api.watch(configmaps, kube_namespace, timeout_seconds=300):
                if event["type"] == "ADDED" and not counted:
                    counted = True
                    connected += 1

        watches = [asyncio.create_task(hold_a_watch()) for _ in range(150)]
        try:
            async with asyncio.timeout(60):
                while connected < len(watches):  # noqa: ASYNC110 - counted by the watches
                    await asyncio.sleep(0.05)
                created = await api.create(
                    configmaps, {"metadata": {"name": "beside-watches"}}, kube_namespace
                )
            assert created["metadata"]["name"] == "beside-watches"
        finally:
            for watch in watches:
                watch.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
