"""Who may use the proxy: one secret token per run, naming the run's owner.

A token is issued when a run starts (its kubeconfig carries it) and revoked
when the run ends; revoking also ends the streams the run opened
(`until_revoked`), so nothing it started outlives it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.kube.types import Owner
from ansible_operator.runner.rbac_refusal import Refusals
from ansible_operator.runner.string_fields import Coercions


@dataclass
class Grant:
    owner: Owner
    # False: the run may only read (an admission webhook without side effects).
    writes: bool = True
    # False: the run owns nothing it writes, follows no dependent, reads past the
    # cache (an admission run, whose answer must not rest on a watch's state).
    owns: bool = True
    # True: a preview (`reconcile --check`): writes go only as server-side dry runs.
    dry_run: bool = False
    # Set when the run ends: the streams it opened close (until_revoked).
    revoked: asyncio.Event = field(default_factory=asyncio.Event)
    # The RBAC refusals the API server answered the run with (rules/refusals.py).
    refusals: Refusals = field(default_factory=Refusals)
    # The values sent as strings for it (rules/string_fields.py).
    coercions: Coercions = field(default_factory=Coercions)
    # The conditions it wrote to its owner's status, by type (rules/owner_conditions.py).
    owner_conditions: dict[str, dict[str, Any]] = field(default_factory=dict)


class Grants:
    """The live runs' tokens."""

    def __init__(self) -> None:
        self._by_token: dict[str, Grant] = {}

    def issue(
        self, owner: Owner, *, writes: bool = True, owns: bool = True, dry_run: bool = False
    ) -> tuple[str, Callable[[], None], Grant]:
        """A new token for a run of `owner`, the function that revokes it, and the grant."""
        token = secrets.token_urlsafe(32)
        grant = self._by_token[token] = Grant(owner, writes, owns, dry_run)

        def revoke() -> None:
            grant = self._by_token.pop(token, None)
            if grant is not None:
                grant.revoked.set()

        return token, revoke, grant

    def bearing(self, authorization: str) -> Grant | None:
        """The grant an `Authorization` header's bearer token names, if it is live."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self._by_token.get(token)


async def until_revoked(grant: Grant, relay: Coroutine[Any, Any, None]) -> None:
    """Run `relay` (the copying of a stream) to its end, or until the run's
    grant is revoked: a watch must not keep feeding a run that has ended."""
    relaying = asyncio.ensure_future(relay)
    revoked = asyncio.ensure_future(grant.revoked.wait())
    try:
        await asyncio.wait((relaying, revoked), return_when=asyncio.FIRST_COMPLETED)
    finally:
        revoked.cancel()
        if not relaying.done():
            relaying.cancel()
            await asyncio.wait((relaying,))
    if not relaying.cancelled():
        relaying.result()  # the copy's own error, as if it had run here
