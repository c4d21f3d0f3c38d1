"""The conditions a run wrote into its own object's status, recorded for the run:
a role that sets `Ready` (or `Reconciling`, `Stalled`) itself owns it, and the
operator then leaves it alone (reconciler/conditions.py, `role_owned`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.written import written_document

WRITES = ("POST", "PUT", "PATCH")


async def record_owner_conditions(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    response = await pass_on(exchange)
    if 200 <= response.status < 300 and _writes_owner(exchange):
        document = written_document(exchange) if exchange.body else None
        for entry in _conditions(document):
            exchange.run.owner_conditions[entry["type"]] = dict(entry)
    return response


def _writes_owner(exchange: Exchange) -> bool:
    target, resource, owner = exchange.target, exchange.resource, exchange.owner
    return (
        exchange.method in WRITES
        and target is not None
        and resource is not None
        and target.subresource in (None, "status")
        and (resource.group, resource.kind) == (owner.group, owner.kind)
        and target.name == owner.name
        and (target.namespace or "") == owner.namespace
    )


def _conditions(document: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    status = (document or {}).get("status")
    listed = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(listed, list):
        return []
    return [
        entry
        for entry in listed
        if isinstance(entry, Mapping) and isinstance(entry.get("type"), str)
    ]
