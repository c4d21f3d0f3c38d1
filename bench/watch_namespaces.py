"""How long an informer takes to sync over many namespaces, one watch per
namespace against one watch across the cluster filtered locally (the figures
in kube/informer.py's docstring, behind CLUSTER_WIDE_ABOVE).

    KUBECONFIG=... python bench/watch_namespaces.py --namespaces 10,100,1000

Creates the largest count of namespaces (labelled `ao-nsbench=<run>`, one
ConfigMap each), measures each count with each way, prints a table, and
deletes the namespaces (unless --keep).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import time
import tracemalloc
import uuid
from typing import Any

import aiohttp

from ansible_operator.kube import informer as informer_module
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import load_config
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.types import Resource

NAMESPACES = Resource("", "v1", "Namespace", "namespaces", False)
CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)
LABEL = "ao-nsbench"


async def _each(calls: list[Any], parallel: int = 16) -> None:
    gate = asyncio.Semaphore(parallel)

    async def one(call: Any) -> None:
        async with gate:
            try:
                await call()
            except ApiError as error:
                if error.status != 409:
                    raise

    await asyncio.gather(*(one(call) for call in calls))


async def create(api: ApiClient, names: list[str], run: str) -> None:
    await _each(
        [
            lambda name=name: api.create(
                NAMESPACES, {"metadata": {"name": name, "labels": {LABEL: run}}}
            )
            for name in names
        ]
    )
    await _each(
        [
            lambda name=name: api.create(
                CONFIGMAPS, {"metadata": {"name": "nsbench"}, "data": {"a": "b"}}, name
            )
            for name in names
        ]
    )


async def delete(api: ApiClient, names: list[str]) -> None:
    async def gone(name: str) -> None:
        try:
            await api.delete(NAMESPACES, name)
        except ApiError as error:
            if error.status != 404:
                raise

    await _each([lambda name=name: gone(name) for name in names])


async def measure(
    config: Any, names: list[str], cluster_wide: bool, limit: float
) -> dict[str, Any]:
    requests = 0

    async def counted(*_args: Any) -> None:
        nonlocal requests
        requests += 1

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(counted)
    informer_module.CLUSTER_WIDE_ABOVE = 0 if cluster_wide else 1_000_000
    gc.collect()
    tracemalloc.start()
    async with ApiClient(config, trace_configs=[trace]) as api:
        informer = Informer(api, CONFIGMAPS, scope=NamespaceScope(names))
        started = time.monotonic()
        informer.begin()
        try:
            await asyncio.wait_for(informer.wait_synced(), limit)
            took: float | None = time.monotonic() - started
        except TimeoutError:
            took = None
        held = sum(1 for key in informer._store if key[1] == "nsbench")
        memory = tracemalloc.get_traced_memory()[0]
        await informer.stop()
    tracemalloc.stop()
    return {
        "synced_s": took,
        "requests": requests,
        "held": held,
        "memory_mib": memory / 2**20,
        "outside": sum(1 for key in informer._store if key[0] not in names),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespaces", default="10,100,1000")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before giving up")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--run", default=uuid.uuid4().hex[:6])
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # per-namespace retries at 1,000 fill pages
    counts = [int(n) for n in args.namespaces.split(",")]
    config = load_config(os.environ["KUBECONFIG"])
    names = [f"nsbench-{args.run}-{n:04d}" for n in range(max(counts))]
    async with ApiClient(config) as api:
        started = time.monotonic()
        await create(api, names, args.run)
        print(f"created {len(names)} namespaces in {time.monotonic() - started:.1f}s")
        try:
            print("namespaces way synced_s requests held memory_mib outside")
            for count in counts:
                for cluster_wide in (False, True):
                    got = await measure(config, names[:count], cluster_wide, args.limit)
                    way = "cluster-wide" if cluster_wide else "per-namespace"
                    synced = f"{got['synced_s']:.2f}" if got["synced_s"] else f">{args.limit:.0f}"
                    print(
                        f"{count} {way} {synced} {got['requests']} {got['held']} "
                        f"{got['memory_mib']:.1f} {got['outside']}",
                        flush=True,
                    )
        finally:
            if not args.keep:
                await delete(api, names)


if __name__ == "__main__":
    asyncio.run(main())
