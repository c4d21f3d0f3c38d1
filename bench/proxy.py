"""Latency of GET, LIST and POST through the API proxy vs straight to the API server.

    .venv/bin/python bench/proxy.py [--requests 300] [--objects 50]

Starts a local control plane (or uses KUBECONFIG), fills a namespace with
ConfigMaps, then times the same requests three ways in one run, on one
keep-alive aiohttp session each, interleaved request by request: direct to
kube-apiserver, through the proxy with the kind not cached (forwarded), and
through the proxy with an informer on the kind (answered from the cache).
Prints p50/p99 and the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from ansible_operator.cluster import provide
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig, load_config
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Owner
from ansible_operator.proxy.server import ApiProxy


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass
class Path_:
    """One way to the API server: a keep-alive session, its base URL and headers."""

    label: str
    session: aiohttp.ClientSession
    url: str
    headers: dict[str, str]


async def once(path: Path_, method: str, target: str, body: dict | None) -> float:
    started = time.perf_counter()
    async with path.session.request(
        method, path.url + target, headers=path.headers, json=body
    ) as response:
        await response.read()
        assert response.status < 300, (response.status, await response.text())
    return (time.perf_counter() - started) * 1000


async def interleaved(
    paths: list[Path_], method: str, target: str, count: int, body_for=None
) -> dict[str, list[float]]:
    """Each round sends one request per path, in turn: drift of the API server
    (its cache, etcd growing with the POSTs) then weighs on every path alike."""
    samples: dict[str, list[float]] = {path.label: [] for path in paths}
    for index in range(count):
        for path in paths:
            body = body_for(path.label, index) if body_for else None
            samples[path.label].append(await once(path, method, target, body))
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
        cache = InformerCache(api, [namespace])
        await cache.informer(configmaps).wait_synced()
        owner = Owner("bench.example.com", "v1", "Bench", namespace, "b", str(uuid.uuid4()))
        base = f"/api/v1/namespaces/{namespace}/configmaps"
        proxies = [
            ApiProxy(config, mapper, port=0),
            ApiProxy(config, mapper, cache=cache, port=0),
        ]
        async with contextlib.AsyncExitStack() as stack:
            paths = [
                Path_(
                    "direct",
                    await stack.enter_async_context(
                        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=config.ssl))
                    ),
                    config.server,
                    await config.auth_headers(),
                )
            ]
            for label, proxy in zip(("proxy, forwarded", "proxy, cached"), proxies, strict=True):
                port = await proxy.start()
                stack.push_async_callback(proxy.stop)
                token = proxy.grant(owner).kubeconfig["users"][0]["user"]["token"]
                paths.append(
                    Path_(
                        label,
                        await stack.enter_async_context(aiohttp.ClientSession()),
                        f"http://127.0.0.1:{port}",
                        {"Authorization": f"Bearer {token}"},
                    )
                )
            try:
                await interleaved(paths, "GET", base + "/cm-0", 20)  # warm up
                results = {
                    "GET": await interleaved(paths, "GET", base + "/cm-0", requests),
                    "LIST": await interleaved(
                        paths, "GET", base + "?labelSelector=bench", requests
                    ),
                    "POST": await interleaved(
                        paths,
                        "POST",
                        base,
                        requests // 3,
                        lambda label, i: {"metadata": {"name": f"p-{label[-4:]}-{i}"}},
                    ),
                }
            finally:
                await cache.stop()
                await api.delete(namespaces, namespace)
    print(
        f"{requests} GETs and LISTs ({objects} ConfigMaps), {requests // 3} POSTs, sequential, "
        "keep-alive, the three paths interleaved; milliseconds"
    )
    print(f"{'path':<18} {'op':<5} {'p50':>7} {'p99':>7} {'p50 vs direct':>14}")
    for path in paths:
        for op, by_path in results.items():
            values = by_path[path.label]
            p50, p99 = statistics.median(values), percentile(values, 0.99)
            delta = p50 - statistics.median(by_path["direct"])
            shown = "" if path.label == "direct" else f"{delta:+.2f}"
            print(f"{path.label:<18} {op:<5} {p50:7.2f} {p99:7.2f} {shown:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--objects", type=int, default=50)
    args = parser.parse_args()
    with provide() as cluster:
        asyncio.run(measure(load_config(Path(cluster.kubeconfig)), args.requests, args.objects))


if __name__ == "__main__":
    main()
