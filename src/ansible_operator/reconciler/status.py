"""Writing an object's status: the status subresource, optimistic locking,
retry on conflict with a fresh read, and every key a role wrote kept."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.types import Resource
from ansible_operator.reconciler.conditions import Condition, merge_conditions

log = logging.getLogger("ansible_operator.controller")

CONFLICT_RETRIES = 8


class ObjectGone(Exception):
    """The object was deleted meanwhile; there is no status to write."""


async def write_conditions(
    api: Api,
    resource: Resource,
    namespace: str | None,
    name: str,
    conditions: Sequence[Condition],
    *,
    observed_generation: int | None = None,
    known: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge our conditions into the object's current status and write it.

    The patch carries the resourceVersion it was computed from, so a concurrent
    writer makes it fail with 409 and it is recomputed from a fresh read,
    instead of overwriting what the other writer (or the role) just wrote.
    `known`: the object as the informer's cache has it, tried first instead of a
    read (a request less per write); if it is stale, the 409 leads to the read.
    """
    use_subresource = "status" in resource.subresources
    for _attempt in range(CONFLICT_RETRIES):
        if known is not None and (known.get("metadata") or {}).get("resourceVersion"):
            current, known, trusted = dict(known), None, False
        else:
            try:
                current = await api.get(resource, name, namespace)
            except ApiError as error:
                if error.status == 404:
                    raise ObjectGone(f"{resource.kind} {namespace}/{name}") from error
                raise
            trusted = True
        status = current.get("status")
        if not isinstance(status, dict):
            status = {}
        new_status = dict(status)
        new_status["conditions"] = merge_conditions(status.get("conditions"), conditions)
        if observed_generation is not None:
            new_status["observedGeneration"] = observed_generation
        # Nothing to write, by the server's word; the cache's might be stale: its patch
        # then fails with 409 (and a no-op write changes nothing).
        if new_status == status and trusted:
            return current
        patch = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "status": new_status,
        }
        try:
            return await api.patch(
                resource,
                name,
                patch,
                namespace=namespace,
                subresource="status" if use_subresource else None,
                patch_type="merge",
            )
        except ApiError as error:
            if error.status == 409:
                continue
            if error.status == 404 and use_subresource:
                # A CRD without a status subresource: status lives in the main resource.
                use_subresource = False
                continue
            if error.status == 404:
                raise ObjectGone(f"{resource.kind} {namespace}/{name}") from error
            raise
    raise ApiError(409, "Conflict", f"status of {namespace}/{name} kept changing; gave up")
