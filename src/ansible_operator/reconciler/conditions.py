"""The status conditions the operator manages, as pure functions over plain data.

Condition types, as the reference: `Running`, `Successful`, `Failure`. Unlike
the reference, `Running` is False once a run has ended, and every write keeps
`lastTransitionTime` unless that condition's status changed.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RUNNING = "Running"
SUCCESSFUL = "Successful"
FAILURE = "Failure"
MANAGED_TYPES = (RUNNING, SUCCESSFUL, FAILURE)


@dataclass(frozen=True)
class AnsibleResult:
    ok: int
    changed: int
    skipped: int
    failures: int
    completion: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "skipped": self.skipped,
            "failures": self.failures,
            "completion": self.completion,
        }


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    ansible_result: AnsibleResult | None = None

    def to_dict(self, now: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": now,
        }
        if self.ansible_result is not None:
            body["ansibleResult"] = self.ansible_result.to_dict()
        return body


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def running(previous: Mapping[str, Any] | None = None) -> list[Condition]:
    """As the reference: an existing Successful goes False while a run is on,
    so `kubectl wait --for=condition=Successful` waits for this run."""
    updates = [Condition(RUNNING, "True", "Running", "Running reconciliation")]
    if condition(previous, SUCCESSFUL) is not None:
        updates.append(Condition(SUCCESSFUL, "False", "Running", "Running reconciliation"))
    return updates


def succeeded(result: AnsibleResult) -> list[Condition]:
    return [
        Condition(RUNNING, "False", "Successful", "Awaiting next reconciliation", result),
        Condition(SUCCESSFUL, "True", "Successful", "Last reconciliation succeeded", result),
        Condition(FAILURE, "False", "Successful", "Last reconciliation succeeded"),
    ]


def failed(message: str, result: AnsibleResult | None, reason: str = "Failed") -> list[Condition]:
    return [
        Condition(RUNNING, "False", reason, "Reconciliation failed", result),
        Condition(SUCCESSFUL, "False", reason, "Last reconciliation failed"),
        Condition(FAILURE, "True", reason, message, result),
    ]


def merge_conditions(
    existing: Sequence[Mapping[str, Any]] | None,
    updates: Sequence[Condition],
    now: str | None = None,
) -> list[dict[str, Any]]:
    """Update conditions by type, keeping every other condition (a role's own)
    and its order; a condition's transition time moves only when its status does."""
    now = now or now_rfc3339()
    result = [dict(condition) for condition in existing or [] if isinstance(condition, Mapping)]
    index = {condition.get("type"): position for position, condition in enumerate(result)}
    for update in updates:
        body = update.to_dict(now)
        position = index.get(update.type)
        if position is None:
            index[update.type] = len(result)
            result.append(body)
            continue
        previous = result[position]
        if previous.get("status") == update.status and previous.get("lastTransitionTime"):
            body["lastTransitionTime"] = previous["lastTransitionTime"]
        result[position] = body
    return result


def condition(status: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    for entry in (status or {}).get("conditions") or []:
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return entry
    return None


def is_true(status: Mapping[str, Any] | None, kind: str) -> bool:
    entry = condition(status, kind)
    return entry is not None and entry.get("status") == "True"
