"""The status conditions the operator manages, as pure functions over plain data.

Condition types, as the reference: `Running`, `Successful`, `Failure`. Unlike
the reference, `Running` is False once a run has ended, and every write keeps
`lastTransitionTime` unless that condition's status changed.

Beside them, kstatus's (sigs.k8s.io/cli-utils `pkg/kstatus`), which Argo CD and Flux
read without a custom health check, each with the `observedGeneration` it describes:

- `Ready`: True once the last run of the current generation succeeded;
- `Reconciling`: True while the operator works toward a generation it has not reached
  (a new spec being run, or a failed run it will retry);
- `Stalled`: True when it will not get there without a change to the object (its data
  refused, its spec invalid): kstatus reads Failed, where a retried failure reads
  InProgress.

A periodic run of an object already Ready leaves them as they are, so GitOps tools do not
see an object go InProgress every reconcile period. A role that sets one of them itself (a
summary `Ready` over its own conditions, as cluster-api's) owns it: once a run has written
it with content the operator did not (`role_owned`), the operator leaves that type alone
for every object of the watch.

`DependentsWatched` (ours) is False while RBAC keeps the operator from watching a kind
the object's runs made (their drift would go unseen), with what to add to the role;
True once it may; absent for objects that never lacked it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RUNNING = "Running"
SUCCESSFUL = "Successful"
FAILURE = "Failure"
READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"
DEPENDENTS_WATCHED = "DependentsWatched"
MANAGED_TYPES = (RUNNING, SUCCESSFUL, FAILURE, READY, RECONCILING, STALLED, DEPENDENTS_WATCHED)
KSTATUS_TYPES = (READY, RECONCILING, STALLED)


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
    observed_generation: int | None = None  # the kstatus conditions': what they describe

    def to_dict(self, now: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": now,
        }
        if self.observed_generation is not None:
            body["observedGeneration"] = self.observed_generation
        if self.ansible_result is not None:
            body["ansibleResult"] = self.ansible_result.to_dict()
        return body


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def running(
    previous: Mapping[str, Any] | None = None, generation: int | None = None
) -> list[Condition]:
    """As the reference: an existing Successful goes False while a run is on,
    so `kubectl wait --for=condition=Successful` waits for this run. And Reconciling
    while the run works toward a generation not reached yet (see the module)."""
    updates = [Condition(RUNNING, "True", "Running", "Running reconciliation")]
    if condition(previous, SUCCESSFUL) is not None:
        updates.append(Condition(SUCCESSFUL, "False", "Running", "Running reconciliation"))
    observed = (previous or {}).get("observedGeneration")
    if generation is not None and (observed != generation or is_true(previous, FAILURE)):
        message = f"Reconciling generation {generation}"
        updates += [
            Condition(READY, "False", "Reconciling", message, None, generation),
            Condition(RECONCILING, "True", "Reconciling", message, None, generation),
        ]
    return updates


def succeeded(result: AnsibleResult, generation: int | None = None) -> list[Condition]:
    updates = [
        Condition(RUNNING, "False", "Successful", "Awaiting next reconciliation", result),
        Condition(SUCCESSFUL, "True", "Successful", "Last reconciliation succeeded", result),
        Condition(FAILURE, "False", "Successful", "Last reconciliation succeeded"),
    ]
    if generation is not None:
        message = f"Generation {generation} reconciled"
        updates += [
            Condition(READY, "True", "Successful", message, None, generation),
            Condition(RECONCILING, "False", "Successful", message, None, generation),
            Condition(STALLED, "False", "Successful", message, None, generation),
        ]
    return updates


def dependents_watched(refused: str | None) -> Condition:
    """False with `refused` (what RBAC refuses, and the rule to add), else True."""
    if refused:
        return Condition(DEPENDENTS_WATCHED, "False", "Forbidden", refused)
    return Condition(
        DEPENDENTS_WATCHED, "True", "Watching", "The operator watches what this object's runs made"
    )


def failed(
    message: str,
    result: AnsibleResult | None,
    reason: str = "Failed",
    *,
    generation: int | None = None,
    stalled: bool = False,
) -> list[Condition]:
    """A failure; `stalled`: one no retry mends, only a change of the object."""
    updates = [
        Condition(RUNNING, "False", reason, "Reconciliation failed", result),
        Condition(SUCCESSFUL, "False", reason, "Last reconciliation failed"),
        Condition(FAILURE, "True", reason, message, result),
    ]
    if generation is not None:
        retried = "False" if stalled else "True"
        updates += [
            Condition(READY, "False", reason, message, None, generation),
            Condition(RECONCILING, retried, reason, message, None, generation),
            Condition(STALLED, "True" if stalled else "False", reason, message, None, generation),
        ]
    return updates


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


def role_owned(
    before: Mapping[str, Any] | None,
    ours: Mapping[str, tuple[str, str, str]],
    written: Mapping[str, Mapping[str, Any]],
) -> set[str]:
    """The kstatus types a run set itself: it wrote them to its object (`written`, by
    type) with a content neither the object had before the run (`before`: its status)
    nor the operator last wrote (`ours`). A role that rewrites the whole list (as
    k8s_status does, merging by type) carries the operator's own unchanged: not its."""
    owned = set()
    for kind in KSTATUS_TYPES:
        entry = written.get(kind)
        if entry is None:
            continue
        previous = condition(before, kind)
        if content(entry) != ours.get(kind) and (
            previous is None or content(entry) != content(previous)
        ):
            owned.add(kind)
    return owned


def content(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    """What a condition says, its times aside."""
    return (str(entry.get("status")), str(entry.get("reason")), str(entry.get("message")))


def condition(status: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    for entry in (status or {}).get("conditions") or []:
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return entry
    return None


def is_true(status: Mapping[str, Any] | None, kind: str) -> bool:
    entry = condition(status, kind)
    return entry is not None and entry.get("status") == "True"
