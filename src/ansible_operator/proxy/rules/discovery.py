"""The kind a resource path names, from API discovery. A kind the server does
not serve is left for the server to say so (forwarded); a failed discovery is
503, since without the kind a write could not be marked as the run's."""

from __future__ import annotations

from aiohttp import web

from ansible_operator.kube.client import ApiError
from ansible_operator.kube.discovery import UnknownResource
from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.statuses import status_response


async def discover_kind(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    target = exchange.target
    if target is None:
        return await pass_on(exchange)
    try:
        exchange.resource = await exchange.services.mapper.resource_for_plural(
            target.group, target.version, target.plural
        )
    except UnknownResource:
        exchange.resource = None
    except ApiError as error:
        return status_response(
            503,
            "ServiceUnavailable",
            f"the ansible-operator proxy could not look up the kind of {exchange.path}: "
            f"API discovery failed: {error}",
        )
    return await pass_on(exchange)
