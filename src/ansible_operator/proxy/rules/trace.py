"""With tracing on, each request of a run becomes a span of the run's trace
(observability/run_trace.py puts it under the task that sent it): its verb,
resource, namespace, name and status code. Right after authenticate, so the
refusals of the rules after it are traced too. Off (the grant has no trace):
one attribute read."""

from __future__ import annotations

import time

from aiohttp import web

from ansible_operator.observability.request_spans import ApiRequest
from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.paths import UnsafePathError, decoded_path, parse_resource_path

MAX_PATH = 256  # characters of a path a span keeps (a refused one may be anything)


async def trace_request(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    trace = exchange.run.trace
    if trace is None:
        return await pass_on(exchange)
    started = time.time_ns()
    status = 0  # the pipeline raised: aiohttp answers 500
    cached = False
    try:
        response = await pass_on(exchange)
        status = response.status
        cached = response.headers.get("X-Cache") == "HIT"
        return response
    finally:
        trace.request(described(exchange, status, started, time.time_ns(), cached=cached))


def described(
    exchange: Exchange, status: int, start_ns: int, end_ns: int, *, cached: bool = False
) -> ApiRequest:
    """The request as its span tells it, from what the rules learnt of it."""
    request = exchange.request
    target, path = exchange.target, exchange.path
    if not path:  # refused before check_path read it
        try:
            path = decoded_path(request.rel_url.raw_path)
            target = parse_resource_path(path)
        except UnsafePathError:
            path = request.rel_url.raw_path
    return ApiRequest(
        method=request.method,
        path=path[:MAX_PATH],
        group=target.group if target is not None else None,
        plural=target.plural if target is not None else "",
        subresource=(target.subresource or "") if target is not None else "",
        namespace=(target.namespace or "") if target is not None else "",
        name=(target.name or "") if target is not None else "",
        watch=request.query.get("watch", "") in ("true", "1"),
        status=status,
        start_ns=start_ns,
        end_ns=end_ns,
        cached=cached,
    )
