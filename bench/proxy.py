"""Latency of GET, LIST and POST through the API proxy vs straight to the API server.

    .venv/bin/python bench/proxy.py [--requests 300] [--objects 50]

Starts a local control plane (or uses KUBECONFIG), fills a namespace with
ConfigMaps, then times the same requests three ways in one run, on one
keep-alive aiohttp session each: direct to kube-apiserver, through the proxy
with the kind not cached (forwarded), and through the proxy with an informer
on the kind (answered from the cache). Prints p50/p99 and the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from pathlib import Path

import aiohttp

from ansible_operator.cluster import provide
from ansible_operator.controller.dependents import CachedKindView, SharedInformer
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig, load_config
from ansible_operator.kube.discovery import Resource, RestMapper
from ansible_operator.kube.informer import Informer
from ansible_operator.proxy.server import ApiProxy
from ansible_operator.runner.access import Owner


class OneKind:
    """A cache of one kind, for the proxy."""

    def __init__(self, view: CachedKindView | None, resource: Resource) -> None:
        self.view, self.resource = view, resource

    def lookup(self, resource: Resource, namespace: str | None, owner: Owner | None = None):
        return self.view if self.view and resource.plural == self.resource.plural else None


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def timed(
    session: aiohttp.ClientSession, method: str, url: str, headers: dict, count: int, body_for=None
) -> list[float]:
    samples = []
    for index in range(count):
        started = time.perf_counter()
        async with session.request(
            method, url, headers=headers, json=body_for(index) if body_for else None
        ) as response:
            await response.read()
            assert response.status < 300, (response.status, await response.text())
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def measure(config: KubeConfig, requests: int, objects: int) -> None:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    async with ApiClient(config) as api:
        mapper = RestMapper(api)
        namespaces = await mapper.resource_for("", "v1", "Namespace")
        configmaps = await mapper.resource_for("", "v1", "ConfigMap")
        await api.create(namespaces, {"metadata": {"name": namespace}})
        for index in range(objects):
            await api.create(
                configmaps,
                {
                    "metadata": {"name": f"cm-{index}", "labels": {"bench": "yes"}},
                    "data": {"k": "v" * 100},
                },
                namespace,
            )
        informer = Informer(api, configmaps, namespaces=[namespace])
        await informer.start()
        await informer.wait_synced()
        view = CachedKindView(SharedInformer(informer, configmaps, (namespace,), False))
        owner = Owner("bench.example.com", "v1", "Bench", namespace, "b", str(uuid.uuid4()))
        rows = []
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        try:
            for label, cache in (
                ("proxy, forwarded", OneKind(None, configmaps)),
                ("proxy, cached", OneKind(view, configmaps)),
            ):
                proxy = ApiProxy(config, mapper, cache=cache, port=0)
                port = await proxy.start()
                token = proxy.grant(owner).kubeconfig["users"][0]["user"]["token"]
                async with aiohttp.ClientSession() as session:
                    auth = {"Authorization": f"Bearer {token}"}
                    url = f"http://127.0.0.1:{port}"
                    await timed(session, "GET", url + base + "/cm-0", auth, 20)  # warm up
                    rows.append(
                        (
                            label,
                            {
                                "GET": await timed(
                                    session, "GET", url + base + "/cm-0", auth, requests
                                ),
                                "LIST": await timed(
                                    session,
                                    "GET",
                                    url + base + "?labelSelector=bench",
                                    auth,
                                    requests,
                                ),
                                "POST": await timed(
                                    session,
                                    "POST",
                                    url + base,
                                    auth,
                                    requests // 3,
                                    lambda i, lab=label: {"metadata": {"name": f"p-{lab[7]}-{i}"}},
                                ),
                            },
                        )
                    )
                await proxy.stop()
            connector = aiohttp.TCPConnector(ssl=config.ssl)
            async with aiohttp.ClientSession(connector=connector) as session:
                auth = await config.auth_headers()
                url = config.server
                await timed(session, "GET", url + base + "/cm-0", auth, 20)
                rows.insert(
                    0,
                    (
                        "direct",
                        {
                            "GET": await timed(
                                session, "GET", url + base + "/cm-0", auth, requests
                            ),
                            "LIST": await timed(
                                session, "GET", url + base + "?labelSelector=bench", auth, requests
                            ),
                            "POST": await timed(
                                session,
                                "POST",
                                url + base,
                                auth,
                                requests // 3,
                                lambda i: {"metadata": {"name": f"d-{i}"}},
                            ),
                        },
                    ),
                )
        finally:
            await informer.stop()
            await api.delete(namespaces, namespace)
    direct = rows[0][1]
    print(
        f"{requests} GETs and LISTs ({objects} ConfigMaps), {requests // 3} POSTs, sequential, "
        "keep-alive; milliseconds"
    )
    print(f"{'path':<18} {'op':<5} {'p50':>7} {'p99':>7} {'p50 vs direct':>14}")
    for label, samples in rows:
        for op, values in samples.items():
            p50, p99 = statistics.median(values), percentile(values, 0.99)
            delta = p50 - statistics.median(direct[op])
            shown = "" if label == "direct" else f"{delta:+.2f}"
            print(f"{label:<18} {op:<5} {p50:7.2f} {p99:7.2f} {shown:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--objects", type=int, default=50)
    args = parser.parse_args()
    with provide() as cluster:
        asyncio.run(measure(load_config(Path(cluster.kubeconfig)), args.requests, args.objects))


if __name__ == "__main__":
    main()
