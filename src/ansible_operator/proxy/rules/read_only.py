"""A run granted reads only (an admission webhook without side effects, a dry
run) gets 403 for anything else: a write, or an upgrade (exec, attach,
port-forward act on the cluster)."""

from __future__ import annotations

import logging

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.statuses import status_response

log = logging.getLogger("ansible_operator.proxy")

READS = ("GET", "HEAD", "OPTIONS")


async def refuse_writes_of_read_only_runs(
    exchange: Exchange, pass_on: Handler
) -> web.StreamResponse:
    request = exchange.request
    if exchange.run.writes or (request.method in READS and not request.headers.get("Upgrade")):
        return await pass_on(exchange)
    log.warning(
        "api proxy refused a write of a read-only run owner=%s method=%s path=%s",
        exchange.owner.describe(),
        request.method,
        exchange.path,
    )
    return status_response(
        403,
        "Forbidden",
        f"the ansible-operator proxy refuses {request.method} {exchange.path}: this run may "
        "only read (an admission webhook without sideEffects: NoneOnDryRun, or a dry run)",
    )
