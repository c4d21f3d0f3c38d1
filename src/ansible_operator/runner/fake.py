"""A Runner that plays no Ansible, for controller tests.

Each run answers with the next scripted outcome (else a plain success). An
outcome is a list of runner events fed through a real RunSummary, so what the
controller reads from the RunResult (stats, failed tasks, requeue_after) is
what a real run with those events would give.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.project import params
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.result import RunResult, RunStatus


@dataclass
class FakeRun:
    events: list[dict[str, Any]] = field(default_factory=list)
    status: RunStatus = "successful"
    return_code: int | None = 0
    reason: str = ""


def stats(*, ok: int = 1, changed: int = 0, skipped: int = 0, failures: int = 0) -> dict[str, Any]:
    """The `playbook_on_stats` event of a run on localhost."""
    per_host = {"ok": ok, "changed": changed, "skipped": skipped, "failures": failures}
    data = {key: {"localhost": count} if count else {} for key, count in per_host.items()}
    return {"event": "playbook_on_stats", "event_data": data}


def failed_task(task: str, message: str) -> dict[str, Any]:
    return {
        "event": "runner_on_failed",
        "event_data": {"task": task, "task_action": "fail", "res": {"msg": message}},
    }


def requeue_after(period: str) -> dict[str, Any]:
    """What the `requeue_after` module's task reports."""
    return {
        "event": "runner_on_ok",
        "event_data": {"task_action": "requeue_after", "res": {"period": period}},
    }


def succeeded(*events: dict[str, Any], ok: int = 1, changed: int = 0) -> FakeRun:
    return FakeRun([*events, stats(ok=ok, changed=changed)])


def failed(task: str, message: str, *events: dict[str, Any]) -> FakeRun:
    return FakeRun([*events, failed_task(task, message), stats(failures=1)], "failed", 2)


def without_stats(reason: str) -> FakeRun:
    """A run that ended before Ansible reported its results."""
    return FakeRun([], "error", 1, reason)


@dataclass
class SeenRun:
    """A plan as the runner saw it: the object (its extra vars' `_<group>_<kind>`)
    is copied at that moment."""

    plan: RunPlan
    obj: Mapping[str, Any]


class FakeRunner:
    def __init__(self, *outcomes: FakeRun) -> None:
        self.outcomes = list(outcomes)
        self.seen: list[SeenRun] = []
        self.results: list[RunResult] = []

    async def run(self, plan: RunPlan) -> RunResult:
        self.seen.append(SeenRun(plan, copy.deepcopy(the_object(plan))))
        outcome = self.outcomes.pop(0) if self.outcomes else succeeded()
        summary = RunSummary()
        for event in outcome.events:
            summary.add(event)
        result = RunResult.of(
            summary,
            ident=plan.ident,
            status=outcome.status,
            return_code=outcome.return_code,
            reason=outcome.reason,
        )
        self.results.append(result)
        return result


def the_object(plan: RunPlan) -> dict[str, Any]:
    """The object a reconcile's run is about, as its extra vars carry it whole
    (`_<group>_<kind>`, params.py)."""
    variables = {**(plan.cluster_vars.variables if plan.cluster_vars else {}), **plan.extravars}
    whole = variables.get(params.object_var_name(plan.owner.group, plan.owner.kind))
    return dict(whole) if isinstance(whole, Mapping) else {}
