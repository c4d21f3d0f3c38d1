"""The last step: the request sent on to the API server with the operator's
credentials, and its answer relayed. Watches and large reads are streamed
through until they end or the run does; other answers are buffered (a write's
answer feeds the cache and the dependent watches: after_write.py)."""

from __future__ import annotations

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from ansible_operator.kube.upstreams import Upstream
from ansible_operator.proxy.exchange import Exchange
from ansible_operator.proxy.grants import until_revoked
from ansible_operator.proxy.headers import (
    APPLY_PATCH,
    HOP_BY_HOP,
    forwarded_headers,
    upstream_url,
)
from ansible_operator.proxy.paths import ResourcePath
from ansible_operator.proxy.statuses import status_response
from ansible_operator.proxy.streams import copy_body

BUFFERED_BODY = 1 << 20  # larger GET answers (big LISTs) are streamed through


def relayed_as_it_comes(
    method: str, target: ResourcePath | None, watching: bool, length: int | None
) -> bool:
    """Whether the API server's answer is streamed through rather than buffered:
    watches, and reads too large (or of unknown size) to hold. The answer to a
    write is always buffered: the cache and the dependent watches read it."""
    if watching:
        return True
    readonly = method == "GET" or target is None
    return readonly and (length is None or length > BUFFERED_BODY)


async def forward(exchange: Exchange) -> web.StreamResponse:
    async with exchange.services.upstreams.use() as via:
        return await _forward_via(exchange, via)


async def _forward_via(exchange: Exchange, via: Upstream) -> web.StreamResponse:
    request, services = exchange.request, exchange.services
    services.stats["forwarded"] += 1
    headers = forwarded_headers(request)
    if request.method == "PATCH" and headers.get("Content-Type", "").startswith(APPLY_PATCH):
        # We may have re-encoded the YAML body as JSON (JSON is YAML).
        headers["Content-Type"] = APPLY_PATCH
    headers.update(await services.config.auth_headers())
    try:
        upstream = await via.session.request(
            request.method,
            upstream_url(request, via.server),
            headers=headers,
            data=exchange.body or None,
            allow_redirects=False,
        )
    except aiohttp.ClientError as error:
        return status_response(502, "BadGateway", f"API server unreachable: {error}")
    async with upstream:
        answer_headers = CIMultiDict(
            (key, value) for key, value in upstream.headers.items() if key.lower() not in HOP_BY_HOP
        )
        watching = request.query.get("watch") in ("1", "true")
        refused = upstream.status == 403  # a small Status the refusals rule reads
        streamed = relayed_as_it_comes(
            request.method, exchange.target, watching, upstream.content_length
        )
        if streamed and not refused:
            return await _streamed(exchange, upstream, answer_headers)
        # A body of known, modest size goes back in one write: a streamed
        # response costs a socket send per chunk plus the chunked framing.
        exchange.answer_body = await upstream.read()
        return web.Response(
            status=upstream.status,
            reason=upstream.reason,
            body=exchange.answer_body,
            headers=answer_headers,
        )


async def _streamed(
    exchange: Exchange, upstream: aiohttp.ClientResponse, headers: CIMultiDict[str]
) -> web.StreamResponse:
    """The answer copied through as it comes, until it ends or the run does."""
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    await response.prepare(exchange.request)
    await until_revoked(exchange.run, copy_body(upstream, response))
    await response.write_eof()
    return response
