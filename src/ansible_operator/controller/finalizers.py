"""Adding and removing our finalizer, with optimistic locking: the finalizer
list is recomputed from a fresh read on conflict, so another controller's
finalizers are never lost."""

from __future__ import annotations

from typing import Any

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.types import Resource

CONFLICT_RETRIES = 8


def has_finalizer(obj: dict[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or [])


async def _update_finalizers(
    api: Api, resource: Resource, obj: dict[str, Any], finalizer: str, *, add: bool
) -> dict[str, Any] | None:
    metadata = obj["metadata"]
    namespace, name = metadata.get("namespace"), metadata["name"]
    current = obj
    for _attempt in range(CONFLICT_RETRIES):
        finalizers = list((current.get("metadata") or {}).get("finalizers") or [])
        if (finalizer in finalizers) == add:
            return current
        finalizers = [*finalizers, finalizer] if add else [f for f in finalizers if f != finalizer]
        patch = {
            "metadata": {
                "resourceVersion": current["metadata"]["resourceVersion"],
                "finalizers": finalizers,
            }
        }
        try:
            return await api.patch(resource, name, patch, namespace=namespace, patch_type="merge")
        except ApiError as error:
            if error.status == 404:
                return None
            if error.status != 409:
                raise
        try:
            current = await api.get(resource, name, namespace)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
    raise ApiError(409, "Conflict", f"finalizers of {namespace}/{name} kept changing; gave up")


async def add_finalizer(
    api: Api, resource: Resource, obj: dict[str, Any], finalizer: str
) -> dict[str, Any] | None:
    return await _update_finalizers(api, resource, obj, finalizer, add=True)


async def remove_finalizer(
    api: Api, resource: Resource, obj: dict[str, Any], finalizer: str
) -> dict[str, Any] | None:
    """None when the object is gone (ours was the last finalizer)."""
    return await _update_finalizers(api, resource, obj, finalizer, add=False)
