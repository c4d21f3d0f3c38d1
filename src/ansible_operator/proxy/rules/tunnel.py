"""Upgrades (exec, attach, port-forward): a WebSocket (how the Python client
and recent kubectl do them) relayed frame by frame with the operator's
credentials, until either end closes or the run ends. SPDY is not relayed."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from ansible_operator.kube.upstreams import Upstream
from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.grants import until_revoked
from ansible_operator.proxy.headers import upstream_url
from ansible_operator.proxy.statuses import status_response
from ansible_operator.proxy.streams import relay_tunnel


async def relay_tunnels(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    if not exchange.request.headers.get("Upgrade"):
        return await pass_on(exchange)
    async with exchange.services.upstreams.use() as via:
        return await _tunnel(exchange, via)


async def _tunnel(exchange: Exchange, via: Upstream) -> web.StreamResponse:
    request = exchange.request
    if request.headers.get("Upgrade", "").lower() != "websocket":
        return status_response(
            501, "NotImplemented", "the proxy relays WebSocket upgrades only (not SPDY)"
        )
    protocols = [
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    ]
    try:
        upstream = await via.session.ws_connect(
            upstream_url(request, via.server),
            protocols=protocols,
            headers=await exchange.services.config.auth_headers(),
            autoping=True,
            max_msg_size=0,
        )
    except aiohttp.WSServerHandshakeError as error:
        return web.Response(status=error.status, text=error.message)
    except aiohttp.ClientError as error:
        return status_response(502, "BadGateway", f"API server unreachable: {error}")
    downstream = web.WebSocketResponse(
        protocols=[upstream.protocol] if upstream.protocol else (), max_msg_size=0
    )
    await downstream.prepare(request)
    async with upstream:
        await until_revoked(exchange.run, relay_tunnel(upstream, downstream))
        await downstream.close()  # no-op unless the run ended first
    return downstream
