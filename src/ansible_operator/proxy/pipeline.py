"""The proxy's rules, in the order a request meets them (one module each in
rules/). Each answers the request itself or passes it on to the rest; the
last step forwards it to the API server (Operator SDK's proxy is the same
chain of handlers: proxy.go, inject_owner.go, cache_response.go)."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler, Rule
from ansible_operator.proxy.rules.after_write import after_write
from ansible_operator.proxy.rules.authenticate import authenticate
from ansible_operator.proxy.rules.body import read_body
from ansible_operator.proxy.rules.cache_read import answer_from_cache
from ansible_operator.proxy.rules.discovery import discover_kind
from ansible_operator.proxy.rules.forward import forward
from ansible_operator.proxy.rules.identity import refuse_other_identities
from ansible_operator.proxy.rules.owner_conditions import record_owner_conditions
from ansible_operator.proxy.rules.owner_marks import mark_ownership
from ansible_operator.proxy.rules.path import check_path
from ansible_operator.proxy.rules.read_only import refuse_writes_of_read_only_runs
from ansible_operator.proxy.rules.refusals import record_refusals
from ansible_operator.proxy.rules.string_fields import coerce_string_fields_of_writes
from ansible_operator.proxy.rules.tunnel import relay_tunnels

RULES: tuple[Rule, ...] = (
    authenticate,  # 401 without a live run's token
    refuse_other_identities,  # 403 for Impersonate-* and X-Remote-* headers
    check_path,  # 400 for a path two decoders could read differently
    refuse_writes_of_read_only_runs,  # 403 for a write of a read-only run, or a preview's not dry
    record_refusals,  # the API server's RBAC refusals recorded for the run
    relay_tunnels,  # exec, attach, port-forward: a WebSocket relayed to its end
    read_body,  # 400 for a body that cannot be read
    discover_kind,  # which kind the path names; 503 when discovery fails
    answer_from_cache,  # GET and LIST of a kind the operator watches
    coerce_string_fields_of_writes,  # 2.19's numbers in labels, ConfigMap data: strings
    record_owner_conditions,  # the conditions a run wrote to its own object
    mark_ownership,  # what a run creates gets the owner's mark
    after_write,  # the dependent registry told; read-your-writes
)
LAST: Handler = forward


def chained(rules: Sequence[Rule], last: Handler) -> Handler:
    """One handler running `rules` in order, each passing on to the next, then `last`."""
    handler = last
    for rule in reversed(rules):
        handler = _then(rule, handler)
    return handler


def _then(rule: Rule, pass_on: Handler) -> Handler:
    async def handle(exchange: Exchange) -> web.StreamResponse:
        return await rule(exchange, pass_on)

    return handle
