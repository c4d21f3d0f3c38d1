"""What a reconcile takes and gives (controller-runtime's pkg/reconcile): the
contract between the generic controller (controller.py) and a reconciler
(ansible_reconciler.py), with no knowledge of either."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_operator.runner.result import RunResult


@dataclass(frozen=True, order=True)
class ObjectKey:
    """Which object to reconcile; namespace "" for a cluster-scoped one."""

    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectKey:
        metadata = obj.get("metadata") or {}
        return cls(metadata.get("namespace") or "", metadata["name"])


@dataclass(frozen=True)
class Outcome:
    """What a reconcile asks of the queue: nothing (done until the next
    event), to run again after `requeue_after` seconds, or to back off and retry;
    and the run it made, if any (what `ansible-operator reconcile` reports)."""

    requeue_after: float | None = None
    retry: bool = False
    periodic: bool = False  # requeue_after is the reconcile period, not the role's ask
    run: RunResult | None = field(default=None, compare=False)  # not an ask of the queue


class Reconciler(Protocol):
    """Brings one object to its wanted state. An exception counts as
    `Outcome(retry=True)`; a reconciler should say what went wrong first."""

    async def reconcile(self, key: ObjectKey) -> Outcome: ...


class ObjectReader(Protocol):
    """Where a reconciler reads the object it reconciles: its informer's
    cache, or the one object of `ansible-operator reconcile`."""

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None: ...
