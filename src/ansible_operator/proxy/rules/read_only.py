"""Runs that must not change the cluster. A run granted reads only (an
admission webhook without side effects) gets 403 for anything else: a write,
or an upgrade (exec, attach, port-forward act on the cluster). A preview
(`reconcile --check`, a dry-run grant) may write only as a server-side dry run
(`dryRun=All`, which kubernetes.core sends in check mode): the API server runs
its defaulting, validation and admission webhooks and stores nothing; any
other write (a `uri` task, a module that ignores check mode) gets 403."""

from __future__ import annotations

import logging

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.statuses import status_response

log = logging.getLogger("ansible_operator.proxy")

READS = ("GET", "HEAD", "OPTIONS")


def is_dry_run(exchange: Exchange) -> bool:
    """The request asks the API server for a server-side dry run (`dryRun=All`)."""
    return "All" in exchange.request.query.getall("dryRun", [])


async def refuse_writes_of_read_only_runs(
    exchange: Exchange, pass_on: Handler
) -> web.StreamResponse:
    request = exchange.request
    reads = request.method in READS and not request.headers.get("Upgrade")
    grant = exchange.run
    if reads or (grant.writes and not grant.dry_run):
        return await pass_on(exchange)
    if (
        grant.writes
        and grant.dry_run
        and is_dry_run(exchange)
        and not request.headers.get("Upgrade")
    ):
        return await pass_on(exchange)
    log.warning(
        "api proxy refused a write of a %s run owner=%s method=%s path=%s",
        "preview" if grant.dry_run else "read-only",
        exchange.owner.describe(),
        request.method,
        exchange.path,
    )
    if grant.dry_run:
        return status_response(
            403,
            "Forbidden",
            f"the ansible-operator proxy refuses {request.method} {exchange.path}: this run "
            "is a preview (reconcile --check): only server-side dry runs (dryRun=All) go to "
            "the API server, and this request is not one",
        )
    return status_response(
        403,
        "Forbidden",
        f"the ansible-operator proxy refuses {request.method} {exchange.path}: this run may "
        "only read (an admission webhook without sideEffects: NoneOnDryRun, or a dry run)",
    )
