"""The request's whole body, read once for the rules after (ownership marks
it, forward sends it); 400 naming why it cannot be read (broken chunking or
compression)."""

from __future__ import annotations

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.statuses import status_response
from ansible_operator.serving.http_malformed import malformed


async def read_body(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    request = exchange.request
    if request.can_read_body:
        try:
            exchange.body = await request.read()
        except web.RequestPayloadError as error:
            problem = malformed(error)
            return status_response(
                400,
                "BadRequest",
                "the ansible-operator proxy cannot read the request's body: "
                f"{problem.message if problem else error}",
            )
    return await pass_on(exchange)
