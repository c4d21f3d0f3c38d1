"""Kubernetes Events about the objects we reconcile (the reference emits none),
aggregated as Kubernetes aggregates them: a repeat raises `count`, it adds no copy."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.types import Resource
from ansible_operator.reconciler.conditions import now_rfc3339

log = logging.getLogger("ansible_operator.controller")

COMPONENT = "ansible-operator"
MAX_MESSAGE = 1024
# Events remembered for aggregation, as client-go's recorder (its LRU cache size).
REMEMBERED = 4096
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


@dataclass
class _Recorded:
    """An Event written, as far as aggregating the next identical one needs."""

    name: str
    namespace: str
    count: int


class EventRecorder:
    """Writes Events as Kubernetes' own recorders do: an Event that repeats one
    already written (same object, type, reason and message) raises that Event's
    `count` and `lastTimestamp` instead of adding a copy, so a failure retried six
    times is one Event seen six times, not six Events."""

    def __init__(self, api: Api, *, remembered: int = REMEMBERED) -> None:
        self.api = api
        self.remembered = remembered
        self._written: OrderedDict[tuple[str, ...], _Recorded] = OrderedDict()
        self._lock = asyncio.Lock()

    async def record(
        self, obj: dict[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        """Best effort: an Event that cannot be written is logged, never fatal."""
        body = event_body(obj, reason, message, "Warning" if warning else "Normal")
        key = _aggregation_key(body)
        async with self._lock:
            try:
                await self._write(key, body)
            except ApiError as error:
                log.warning(
                    "could not record event reason=%s kind=%s namespace=%s name=%s error=%s",
                    reason,
                    obj.get("kind"),
                    body["involvedObject"]["namespace"],
                    body["involvedObject"]["name"],
                    error,
                )

    async def _write(self, key: tuple[str, ...], body: dict[str, Any]) -> None:
        earlier = self._written.get(key)
        if earlier is not None:
            count = earlier.count + 1
            patch = {"count": count, "lastTimestamp": body["lastTimestamp"]}
            try:
                await self.api.patch(EVENTS, earlier.name, patch, namespace=earlier.namespace)
            except ApiError as error:
                if error.status != 404:  # expired (the server keeps Events ~1h): write anew
                    raise
            else:
                earlier.count = count
                self._written.move_to_end(key)
                return
        namespace = body["metadata"]["namespace"]
        await self.api.create(EVENTS, body, namespace=namespace)
        self._written[key] = _Recorded(body["metadata"]["name"], namespace, 1)
        self._written.move_to_end(key)
        while len(self._written) > self.remembered:
            self._written.popitem(last=False)


def _aggregation_key(body: dict[str, Any]) -> tuple[str, ...]:
    involved = body["involvedObject"]
    return tuple(
        str(part or "")
        for part in (
            body["source"]["component"],
            involved["apiVersion"],
            involved["kind"],
            involved["namespace"],
            involved["name"],
            involved["uid"],
            body["type"],
            body["reason"],
            body["message"],
        )
    )


# One recorder per API client: every reconciler of a manager shares its client,
# so repeats from any of them aggregate.
_recorders: WeakKeyDictionary[Api, EventRecorder] = WeakKeyDictionary()


def recorder_for(api: Api) -> EventRecorder:
    recorder = _recorders.get(api)
    if recorder is None:
        recorder = _recorders[api] = EventRecorder(api)
    return recorder


async def record_event(
    api: Api, obj: dict[str, Any], reason: str, message: str, *, warning: bool = False
) -> None:
    """Best effort: an Event that cannot be written is logged, never fatal."""
    await recorder_for(api).record(obj, reason, message, warning=warning)
