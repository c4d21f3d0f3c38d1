"""Around the forwarding of a write: the dependent registry is told of it
before it is sent and learns its outcome before the run does (writes.py says
why in that order); then, if it succeeded, the run can read back what it
wrote at once (read-your-writes), and an update that leaves an object
without our mark is noted once."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from aiohttp import web

from ansible_operator.proxy import ownership
from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.writes import Write

log = logging.getLogger("ansible_operator.proxy")

WRITES = ("POST", "PUT", "PATCH", "DELETE")
UNOWNED_REMEMBERED = 10_000  # (owner, object) pairs already logged as left unowned


async def after_write(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    if (
        exchange.method not in WRITES
        or exchange.target is None
        or exchange.resource is None
        or not exchange.run.owns
        or exchange.run.dry_run  # a preview's writes store nothing: none to follow or read
    ):
        return await pass_on(exchange)
    write = _reported(exchange)
    try:
        response = await pass_on(exchange)
        if exchange.answer_body is not None and 200 <= response.status < 300:
            written = _written_object(exchange)
            if write is not None:
                write.succeeded(written)
            if written is not None:
                _read_back(exchange, written)
        return response
    finally:
        if write is not None:
            # Not settled above: refused, failed, or the run went away while
            # it was sent. Its events must not wait for it any longer.
            write.failed()


def _reported(exchange: Exchange) -> Write | None:
    """The write, as the dependent registry has been told of it. A DELETE is
    no reason to follow a kind (and its events always count)."""
    dependents = exchange.services.dependents
    if dependents is None or exchange.method == "DELETE":
        return None
    assert exchange.target is not None and exchange.resource is not None
    write = Write(exchange.resource, exchange.owner, exchange.namespace, exchange.target.name)
    dependents.record(write)
    return write


def _written_object(exchange: Exchange) -> dict[str, Any] | None:
    """The object the API server answered with, if the answer is one of the kind."""
    assert exchange.resource is not None and exchange.answer_body is not None
    obj: Any = None
    with contextlib.suppress(ValueError):
        obj = json.loads(exchange.answer_body)
    if not isinstance(obj, dict) or obj.get("kind") != exchange.resource.kind:
        return None
    return obj


def _read_back(exchange: Exchange, obj: dict[str, Any]) -> None:
    assert exchange.target is not None and exchange.resource is not None
    if exchange.method in ("PUT", "PATCH") and exchange.target.subresource is None:
        _say_if_unowned(exchange, obj)
    metadata = obj.get("metadata") or {}
    kind = exchange.services.cached_kind(
        exchange.resource, metadata.get("namespace") or None, exchange.owner
    )
    if kind is not None:
        # Read-your-writes: the role's next GET sees this version.
        # A DELETE answers with the object as it was (or still is,
        # while finalizers run): gone only if it has no finalizers.
        gone = exchange.method == "DELETE" and not metadata.get("finalizers")
        kind.remember(obj, deleted=gone)


def _say_if_unowned(exchange: Exchange, obj: dict[str, Any]) -> None:
    """Once per object and owner: a run updated an object it did not create,
    and it stays without our mark (so deleting the owner leaves it alone)."""
    assert exchange.resource is not None
    services, owner = exchange.services, exchange.owner
    metadata = obj.get("metadata") or {}
    uid = metadata.get("uid")
    if not services.inject_owner_ref or not uid or uid == owner.uid:
        return
    said = services.unowned_said
    if ownership.carries_ours(obj, owner) or (owner.uid, uid) in said:
        return
    if len(said) >= UNOWNED_REMEMBERED:
        said.clear()
    said.add((owner.uid, uid))
    log.info(
        "write left object unowned kind=%s namespace=%s name=%s owner=%s reason=%s",
        exchange.resource.kind,
        metadata.get("namespace") or "",
        metadata.get("name"),
        owner.describe(),
        "the run did not create it; only objects a run creates get the owner's mark",
    )
