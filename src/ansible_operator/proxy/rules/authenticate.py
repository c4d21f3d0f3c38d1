"""Only the operator's own runs: a live run's token, or 401."""

from __future__ import annotations

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.statuses import status_response


async def authenticate(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    services = exchange.services
    grant = services.grants.bearing(exchange.request.headers.get("Authorization", ""))
    if grant is None:
        # No token, a forged one, or one of a run that has ended.
        return status_response(
            401, "Unauthorized", "the ansible-operator proxy serves only the operator's own runs"
        )
    exchange.grant = grant
    return await pass_on(exchange)
