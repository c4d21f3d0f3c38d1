"""GET and LIST of a kind the operator already watches, answered from its
informer (`X-Cache: HIT`), as the API server would answer a read of the
latest state. Everything else goes on to the server: watches, reads of a
given resourceVersion, subresources, an object not (yet) cached, a selector
only the server evaluates, a kind the owner's watch blacklists, and, in a
replica of a shard ring, a LIST (its cache holds its share of the kind only)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from ansible_operator.kube.selectors import SelectorError
from ansible_operator.proxy.exchange import Exchange, Handler

# Items from which a list's JSON is written in a thread, not on the event loop
# (10,000 Deployments are ~14 MB of JSON).
LARGE_LIST = 100


async def answer_from_cache(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    reads_cache = exchange.method == "GET" and exchange.run.owns
    body = await _cached_answer(exchange) if reads_cache else None
    if body is None:
        return await pass_on(exchange)
    services = exchange.services
    if services.on_cache_hit is not None:
        services.on_cache_hit()
    if len(body.get("items") or ()) >= LARGE_LIST:
        text = await asyncio.to_thread(json.dumps, body)
    else:
        text = json.dumps(body)
    return web.Response(text=text, content_type="application/json", headers={"X-Cache": "HIT"})


async def _cached_answer(exchange: Exchange) -> dict[str, Any] | None:
    target, resource = exchange.target, exchange.resource
    if target is None or resource is None or target.subresource is not None:
        return None
    query = exchange.request.query
    if query.get("watch") in ("1", "true") or query.get("resourceVersion") not in (None, "", "0"):
        return None
    namespace = exchange.namespace
    kind = exchange.services.cached_kind(resource, namespace, exchange.owner)
    if kind is None:
        return None
    if target.name is not None:
        obj = kind.get(namespace, target.name)
        if obj is None:
            return None  # maybe just created: let the server answer
        return {**obj, "apiVersion": resource.api_version, "kind": resource.kind}
    if not kind.complete:
        return None  # a share of the kind: the server has the rest
    try:
        items = await kind.list(namespace, query.get("labelSelector"), query.get("fieldSelector"))
    except SelectorError:
        return None  # a selector only the server evaluates
    return {
        "apiVersion": resource.api_version,
        "kind": f"{resource.kind}List",
        "metadata": {"resourceVersion": kind.resource_version},
        "items": [
            {**item, "apiVersion": resource.api_version, "kind": resource.kind} for item in items
        ],
    }
