"""A run acts as the operator: headers that would choose another identity
(`Impersonate-*`, and the `X-Remote-*` of request-header authentication, which
an API server trusting the operator's client certificate as a front proxy
would honour) are refused, never forwarded nor silently dropped."""

from __future__ import annotations

from aiohttp import web

from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.headers import names_an_identity
from ansible_operator.proxy.statuses import status_response


async def refuse_other_identities(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    named = next((key for key in exchange.request.headers if names_an_identity(key)), None)
    if named is None:
        return await pass_on(exchange)
    # Cached answers could not honour it, and a run acts as its operator.
    return status_response(
        403,
        "Forbidden",
        f"the ansible-operator proxy does not forward impersonation nor request-header "
        f"identities (header {named}); a run acts as the operator's service account",
    )
