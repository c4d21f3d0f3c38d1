"""Numbers and booleans in string-only fields of core kinds (labels,
annotations, ConfigMap and Secret data) sent as the strings ansible-core 2.18
rendered, and recorded for the run: the decisions and why are in
runner/string_fields.py. Off with `--coerce-string-fields=false`."""

from __future__ import annotations

import json

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.written import written_document
from ansible_operator.runner.string_fields import coerce_string_fields

WRITES = ("POST", "PUT", "PATCH")


async def coerce_string_fields_of_writes(
    exchange: Exchange, pass_on: Handler
) -> web.StreamResponse:
    target, resource = exchange.target, exchange.resource
    if (
        exchange.services.coerce_strings
        and exchange.body
        and exchange.method in WRITES
        and target is not None
        and target.subresource is None
        and resource is not None
    ):
        document = written_document(exchange)
        if document is not None:
            coerced, changed = coerce_string_fields(document, resource.group, resource.kind)
            if changed:
                exchange.body = json.dumps(coerced).encode()
                for item in changed:
                    exchange.run.coercions.add(item)
    return await pass_on(exchange)
