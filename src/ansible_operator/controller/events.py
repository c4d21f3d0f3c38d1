"""Kubernetes Events about the objects we reconcile (the reference emits none)."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from ansible_operator.controller.conditions import now_rfc3339
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.types import Resource

log = logging.getLogger("ansible_operator.controller")

COMPONENT = "ansible-operator"
MAX_MESSAGE = 1024
EVENTS = Resource(
    group="",
    version="v1",
    kind="Event",
    plural="events",
    namespaced=True,
    verbs=frozenset({"create", "get", "list", "patch"}),
)


def event_body(obj: dict[str, Any], reason: str, message: str, event_type: str) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    now = now_rfc3339()
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{metadata.get('name', 'object')}.{secrets.token_hex(8)}",
            "namespace": metadata.get("namespace") or "default",
        },
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "uid": metadata.get("uid"),
            "resourceVersion": metadata.get("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


async def record_event(
    api: ApiClient, obj: dict[str, Any], reason: str, message: str, *, warning: bool = False
) -> None:
    """Best effort: an Event that cannot be written is logged, never fatal."""
    body = event_body(obj, reason, message, "Warning" if warning else "Normal")
    try:
        await api.create(EVENTS, body, namespace=body["metadata"]["namespace"])
    except ApiError as error:
        log.warning(
            "could not record event reason=%s kind=%s namespace=%s name=%s error=%s",
            reason,
            obj.get("kind"),
            body["involvedObject"]["namespace"],
            body["involvedObject"]["name"],
            error,
        )
