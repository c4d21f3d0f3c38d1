"""A run's streams end with the run (issue 25, item 6).

A run's token is revoked when the run ends; before, only new requests were
refused: a watch (or a log follow, an exec tunnel) opened during the run kept
streaming the cluster's objects to whatever held it, for as long as the API
server kept it open (half an hour or more). Here a run opens such streams
through the proxy, the run ends, and the streams must end too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from proxy_run import Run, proxy_for_a_run

from ansible_operator.cluster import Cluster
from ansible_operator.kube.config import KubeConfig, load_config
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Owner
from ansible_operator.proxy.server import ApiProxy

ENDS_WITHIN = 60.0  # seconds: generous on a busy machine; unfixed, a watch lasts 30 min or more


@pytest.fixture
async def run(kube_cluster: Cluster, kube_namespace: str) -> AsyncIterator[Run]:
    async with proxy_for_a_run(load_config(kube_cluster.kubeconfig), kube_namespace) as run:
        yield run


@pytest.mark.cluster
async def test_a_watch_opened_by_a_run_ends_when_the_run_ends(run: Run) -> None:
    path = f"/api/v1/namespaces/{run.namespace}/configmaps?watch=1"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session,
        session.get(run.url + path, headers={"Authorization": f"Bearer {run.token}"}) as watch,
    ):
        assert watch.status == 200
        # The watch is live: the API server sends the ConfigMaps there are.
        first = json.loads(await watch.content.readline())
        assert first["type"] == "ADDED" and first["object"]["kind"] == "ConfigMap"

        run.revoke()
        await asyncio.wait_for(watch.content.read(), ENDS_WITHIN)
        assert watch.content.at_eof()

    status, _, body = await run.send("GET", path)
    assert status == 401, body


# ----- tunnels (exec, attach, port-forward): an API server stand-in -----------
@pytest.fixture
async def endless_tunnel() -> AsyncIterator[KubeConfig]:
    """A stand-in API server whose exec answers every frame and never closes."""

    async def exec_(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        async for message in socket:
            await socket.send_str(f"echo {message.data}")
        return socket

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{namespace}/pods/{name}/exec", exec_)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield KubeConfig(server=f"http://127.0.0.1:{port}", ssl=False)
    finally:
        await runner.cleanup()


async def test_an_exec_tunnel_opened_by_a_run_closes_when_the_run_ends(
    endless_tunnel: KubeConfig,
) -> None:
    # The tunnel is relayed before any discovery: no mapper needed.
    proxy = ApiProxy(endless_tunnel, RestMapper(None), port=0)
    port = await proxy.start()
    access = proxy.grant(Owner("", "v1", "ConfigMap", "ns", "owner", "uid-1"))
    assert access.kubeconfig is not None
    token = access.kubeconfig["users"][0]["user"]["token"]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                f"http://127.0.0.1:{port}/api/v1/namespaces/ns/pods/p/exec?command=sh",
                headers={"Authorization": f"Bearer {token}"},
            ) as tunnel,
        ):
            await tunnel.send_str("id")
            assert (await tunnel.receive_str(timeout=ENDS_WITHIN)) == "echo id"

            access.revoke()
            ending = await tunnel.receive(timeout=ENDS_WITHIN)
            assert ending.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), ending
    finally:
        await proxy.stop()
