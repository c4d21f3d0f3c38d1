"""Writes (POST, PUT, server-side apply, patches that would drop our mark) of
an object get the owner's mark: an ownerReference or the owner annotations
(the decisions: ownership.py). Only what a run creates is marked: a write to
an object that exists without our mark leaves its ownership alone.

In a shard ring (`shard_labels`), the marked also get the owner's shard label,
and so does a merge patch of an object that carries our mark without it (an
object made before the label was: read from the cache when it holds it, else
from the server, once; afterwards the cache holds it, labelled)."""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from ansible_operator.proxy import ownership
from ansible_operator.proxy.exchange import Exchange, Handler
from ansible_operator.proxy.headers import APPLY_PATCH, MERGE_PATCHES, content_type

log = logging.getLogger("ansible_operator.proxy")

MARKED_WRITES = ("POST", "PUT", "PATCH")


async def mark_ownership(exchange: Exchange, pass_on: Handler) -> web.StreamResponse:
    target = exchange.target
    if (
        exchange.run.owns
        and exchange.services.inject_owner_ref
        and exchange.body
        and exchange.method in MARKED_WRITES
        and target is not None
        and target.subresource is None
        and exchange.resource is not None
    ):
        exchange.body = await _marked(exchange)
    return await pass_on(exchange)


async def _marked(exchange: Exchange) -> bytes:
    """The body with our mark, or as it was when it is not ours to mark."""
    document = _document(exchange)
    if document is None:
        return exchange.body
    merge_patch = exchange.method == "PATCH" and content_type(exchange.request) in MERGE_PATCHES
    if merge_patch and not ownership.patch_removes_ours(document, exchange.owner):
        if exchange.services.shard_labels and not ownership.shard_labelled(
            document, exchange.owner
        ):
            return await _shard_labelled(exchange, document)
        return exchange.body
    injection = await _injection(exchange, document)
    if injection is None or not injection.changed:
        return exchange.body
    return json.dumps(injection.body).encode()


async def _shard_labelled(exchange: Exchange, patch: dict[str, Any]) -> bytes:
    """A merge patch of an object that carries our mark but not the owner's
    shard label, with the label added; any other patch as it came."""
    owner = exchange.owner
    found, existing = await _existing(exchange)
    if not found or existing is None or not ownership.carries_ours(existing, owner):
        return exchange.body
    if ownership.shard_labelled(existing, owner):
        return exchange.body
    labelled = ownership.label_patch(patch, owner)
    if labelled is None:
        return exchange.body
    exchange.services.stats["injected"] += 1
    return json.dumps(labelled).encode()


def _document(exchange: Exchange) -> dict[str, Any] | None:
    """The object the body sends (YAML for an apply), or None: unreadable, or a
    JSON patch (a list of operations, left as is)."""
    applying = exchange.method == "PATCH" and content_type(exchange.request) == APPLY_PATCH
    try:
        document = yaml.safe_load(exchange.body) if applying else json.loads(exchange.body)
    except (ValueError, yaml.YAMLError):
        return None
    return document if isinstance(document, dict) else None


async def _injection(exchange: Exchange, document: dict[str, Any]) -> ownership.Injection | None:
    """Our mark on `document`, or None when the object could not be read to
    tell whether the write creates it."""
    assert exchange.target is not None
    owner, name = exchange.owner, exchange.target.name
    metadata = document.get("metadata") or {}
    namespace = exchange.namespace
    labels = exchange.services.shard_labels
    if exchange.method == "POST":
        namespace = metadata.get("namespace") or namespace
        injection = ownership.inject(document, owner, namespace, shard_label=labels)
    else:
        # A replace, an apply or a patch dropping our mark: it creates the
        # object, or updates one that may not be ours to mark.
        found, existing = await _existing(exchange)
        if not found:
            reason = "could not read the object to tell whether the run creates it"
            _say_left_alone(exchange, namespace, name, reason)
            return None
        injection = ownership.mark_write(
            document, owner, namespace, existing=existing, shard_label=labels
        )
    if injection.note:
        _say_left_alone(exchange, namespace, metadata.get("name") or name, injection.note)
    return injection


async def _existing(exchange: Exchange) -> tuple[bool, dict[str, Any] | None]:
    """(read, the object as it is now or None when absent). A cached copy
    that carries our mark is enough; anything else is read from the server,
    so an object made a moment ago by hand is never taken for a new one."""
    assert exchange.target is not None and exchange.resource is not None
    services, namespace, name = exchange.services, exchange.namespace, exchange.target.name
    if name is not None:
        kind = services.cached_kind(exchange.resource, namespace, exchange.owner)
        cached = kind.get(namespace, name) if kind is not None else None
        if cached is not None and ownership.carries_ours(cached, exchange.owner):
            return True, cached
    async with services.upstreams.use() as via:
        url = via.server.rstrip("/") + exchange.request.rel_url.raw_path
        headers = {"Accept": "application/json", **(await services.config.auth_headers())}
        try:
            async with via.session.get(url, headers=headers, allow_redirects=False) as answer:
                if answer.status == 404:
                    return True, None
                if answer.status != 200:
                    return False, None
                current = await answer.json(content_type=None)
        except (aiohttp.ClientError, ValueError):
            return False, None
    return isinstance(current, dict), current if isinstance(current, dict) else None


def _say_left_alone(
    exchange: Exchange, namespace: str | None, name: str | None, reason: str
) -> None:
    assert exchange.resource is not None
    log.warning(
        "ownership left alone kind=%s namespace=%s name=%s owner=%s reason=%s",
        exchange.resource.kind,
        namespace or "",
        name,
        exchange.owner.describe(),
        reason,
    )
