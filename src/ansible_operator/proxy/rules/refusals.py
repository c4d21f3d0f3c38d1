"""The API server's RBAC refusals (403) recorded for the run they answer: a
task under `no_log: true` fails with nothing but "output has been hidden",
and its failure message then comes from this record (runner/rbac_refusal.py:
what was refused, and the rule to add; never a value the task sent)."""

from __future__ import annotations

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.runner.rbac_refusal import refusal_in_answer


async def record_refusals(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    response = await pass_on(exchange)
    if response.status == 403:
        refusal = refusal_in_answer(exchange.answer_body)
        if refusal is not None:
            exchange.run.refusals.add(refusal)
    return response
