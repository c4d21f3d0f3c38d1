"""One Ansible run per admission request, answered before the API server gives up.

The same way through the runner as a reconcile (runner/host.py: the run directory, the
event channel, the warm runner, the run's cgroup, redaction), with the webhooks' own run
slots, and without what only reconciles need: no status, no finalizer, no Kubernetes
Events, no requeue. The run reaches the API through the proxy with a grant that owns
nothing and may only read, unless the webhook declares `sideEffects: NoneOnDryRun` and the
request is no dry run.

The run has the webhook's `timeoutSeconds`, less a margin, to answer (waiting for a free run
slot included): past it, the request is decided by the failure policy at once, and the run is
killed in the background. Run slots are shared fairly between the clients that ask
(admission_limits.py): a client with a full wait gets SlotsBusy, before anything starts.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from ansible_operator.kube.types import Owner
from ansible_operator.project.admission import RunVariables
from ansible_operator.project.webhook_entries import Webhook
from ansible_operator.runner import priority
from ansible_operator.runner.host import RunnerHost
from ansible_operator.runner.plan import RunPlan, new_ident
from ansible_operator.runner.result import RunResult
from ansible_operator.settings import Settings
from ansible_operator.values.durations import format_duration
from ansible_operator.webhooks.admission_limits import FairSlots
from ansible_operator.webhooks.answer import Answer, RunOutcome, answer_from_event
from ansible_operator.webhooks.review import AdmissionRequest

log = logging.getLogger("ansible_operator.webhooks")

# Of the webhook's timeoutSeconds, what the answer needs to reach the API server in time.
MARGIN_SHARE = 0.1
MAX_MARGIN = 1.0
# A backstop for the run itself; the answer never waits for it.
KILL_AFTER = 30.0


def answer_budget(webhook: Webhook) -> float:
    """Seconds the run has to answer: the webhook's timeout less what the way back needs."""
    timeout = float(webhook.timeout_seconds)
    return timeout - min(MAX_MARGIN, timeout * MARGIN_SHARE)


def owner_for(request: AdmissionRequest) -> Owner:
    """Whom the run acts for, as the proxy names it in its log lines; no uid: the
    object may not exist yet, and a webhook run marks nothing as owned."""
    kind = request.kind
    return Owner(
        group=kind.get("group", ""),
        version=kind.get("version", ""),
        kind=kind.get("kind", ""),
        namespace=request.namespace,
        name=request.shown_name,
        uid="",
    )


class AdmissionRunner:
    def __init__(
        self,
        *,
        settings: Settings,
        host: RunnerHost,  # the manager's: its proxy, event receiver, warm processes
        slots: FairSlots,  # concurrent admission runs, shared fairly between clients
    ) -> None:
        self.settings = settings
        self.host = host
        self.slots = slots
        self._background: set[asyncio.Future[Any]] = set()

    async def run(
        self, webhook: Webhook, request: AdmissionRequest, variables: RunVariables, peer: str
    ) -> RunOutcome:
        """The outcome of a run for `request` (with `variables`, review.admission_vars)
        from the client at `peer`; SlotsBusy (nothing started) when that client, or
        every client, already waits for as many runs as may wait."""
        budget = answer_budget(webhook)
        plan = self.plan(webhook, request, variables, budget)
        progress = Progress()
        ticket = self.slots.reserve(peer)

        async def run_in_slot() -> RunOutcome:
            async with ticket:
                result = await self.host.run(plan, on_event=progress.hear)
            return outcome_of(result, progress)

        task = asyncio.ensure_future(run_in_slot())
        # The slot is held until the run is over, killed in the background included.
        task.add_done_callback(lambda _: ticket.close())
        try:
            done, _ = await asyncio.wait({task}, timeout=budget)
        except asyncio.CancelledError:  # nobody waits for the answer any more
            self._stop_in_background(task)
            raise
        if task in done:
            return task.result()
        # Answer now; the run is killed (every process it started) while the answer goes.
        self._stop_in_background(task)
        return RunOutcome(
            answer=None,
            failure=(
                f"the role did not answer within {format_duration(budget)} "
                f"(timeoutSeconds {webhook.timeout_seconds}; last task: "
                f"{progress.last_task or 'none'}); the run was stopped"
            ),
            duration=budget,
            ident=plan.ident,
        )

    def plan(
        self,
        webhook: Webhook,
        request: AdmissionRequest,
        variables: RunVariables,
        budget: float,
    ) -> RunPlan:
        settings = self.settings
        return RunPlan(
            ident=new_ident(),
            owner=owner_for(request),
            described=f"webhook={webhook.name} {request.describe()}",
            subject=Path("webhooks", webhook.name),
            role=webhook.role,
            playbook=webhook.playbook,
            extravars=variables.author,
            cluster_vars=variables.cluster,
            verbosity=settings.ansible.verbosity,
            timeout=budget + KILL_AFTER,
            keep_artifacts=webhook.max_runner_artifacts,
            shares_subject=True,  # concurrent requests: rotated by the host, after each run
            skip_facts=True,  # a role's facts about this host cost a second, every request
            ansible_args=settings.ansible.args,
            writes=webhook.may_write(request.dry_run),
            owns=False,  # a webhook run owns nothing it writes
            nice=priority.ADMISSION,  # answered within seconds: before reconciles
            capped=False,  # the webhooks' fair slots instead (admission_limits.py)
        )

    def _stop_in_background(self, task: asyncio.Future[Any]) -> None:
        task.cancel()
        self._background.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("admission run cleanup failed: %s", task.exception())

    async def stop(self) -> None:
        """Wait for runs still being killed."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


class Progress:
    """What a run's events told so far: its answer (the first one), its last task."""

    def __init__(self) -> None:
        self.answer: Answer | None = None
        self.last_task = ""

    def hear(self, event: dict[str, Any]) -> None:
        if event.get("event") == "playbook_on_task_start":
            self.last_task = str((event.get("event_data") or {}).get("task", ""))
        if self.answer is None:
            self.answer = answer_from_event(event)


def outcome_of(result: RunResult, progress: Progress) -> RunOutcome:
    answer = _redacted(progress.answer, result) if progress.answer is not None else None
    failure = "" if result.succeeded else f"the role failed: {result.message}"
    return RunOutcome(answer, failure, result.duration, result.ident)


def _redacted(answer: Answer, result: RunResult) -> Answer:
    """What the run read from Secrets never reaches the client in a message or warning."""
    text = result.redacted
    return Answer(
        allowed=answer.allowed,
        message=text(answer.message),
        reason=answer.reason,
        code=answer.code,
        obj=answer.obj,
        patch=answer.patch,
        warnings=tuple(text(warning) for warning in answer.warnings),
        audit_annotations=answer.audit_annotations,
    )
