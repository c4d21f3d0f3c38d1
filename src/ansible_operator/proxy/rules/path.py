"""What the path addresses, read as the API server will read it (paths.py);
a path two decoders could read differently is refused with 400. The request
is still forwarded with its path exactly as sent."""

from __future__ import annotations

import logging

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.paths import UnsafePathError, decoded_path, parse_resource_path
from ansible_operator.proxy.statuses import status_response

log = logging.getLogger("ansible_operator.proxy")


async def check_path(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    raw_path = exchange.request.rel_url.raw_path
    try:
        exchange.path = decoded_path(raw_path)
    except UnsafePathError as error:
        log.warning(
            "api proxy refused a path owner=%s path=%r reason=%s",
            exchange.owner.describe(),
            raw_path,
            error,
        )
        return status_response(
            400, "BadRequest", f"the ansible-operator proxy refuses this path: {error}"
        )
    exchange.target = parse_resource_path(exchange.path)
    return await pass_on(exchange)
