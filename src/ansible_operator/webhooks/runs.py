"""One Ansible run per admission request, answered before the API server gives up.

The same way through the runner as a reconcile (runner/play.py: the run directory, the
event channel, the warm runner, the run's cgroup, redaction), with the webhooks' own event
receiver, proxy and run slots, and without what only reconciles need: no status, no
finalizer, no Kubernetes Events, no requeue. The run reaches the API through the proxy with
a grant that may only read, unless the webhook declares `sideEffects: NoneOnDryRun` and the
request is no dry run.

The run has the webhook's `timeoutSeconds`, less a margin, to answer (waiting for a free run
slot included): past it, the request is decided by the failure policy at once, and the run is
killed in the background. Run slots are shared fairly between the clients that ask
(admission_limits.py): a client with a full wait gets SlotsBusy, before anything starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from ansible_operator.durations import format_duration
from ansible_operator.kube.types import Owner
from ansible_operator.options import OperatorOptions
from ansible_operator.runner import priority, rundir
from ansible_operator.runner.access import AccessProvider
from ansible_operator.runner.cgroups import RunGroups
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.play import AnsiblePlayer, RunPlan
from ansible_operator.runner.process import RunSpec
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.warm.processes import WarmProcesses
from ansible_operator.webhook_entries import Webhook
from ansible_operator.webhooks.admission_limits import FairSlots, Ticket
from ansible_operator.webhooks.answer import Answer, RunOutcome, answer_from_event
from ansible_operator.webhooks.review import AdmissionRequest, admission_vars

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
        options: OperatorOptions,
        receiver: EventReceiver,  # the webhooks' own, as is the proxy (`access`)
        access: AccessProvider,
        runner_root: Path,
        slots: FairSlots,  # concurrent admission runs, shared fairly between clients
        warm: Callable[[], WarmProcesses | None],  # the warm processes, once started
        run_groups: Callable[[], RunGroups | None],
    ) -> None:
        self.options = options
        self.runner_root = runner_root
        self.slots = slots
        self.player = AnsiblePlayer(
            options=options,
            receiver=receiver,
            access=access,
            runner_root=runner_root,
            warm=warm,
            run_groups=run_groups,
        )
        self._in_flight: set[str] = set()  # idents whose artifacts must stay
        self._background: set[asyncio.Future[Any]] = set()

    async def run(self, webhook: Webhook, request: AdmissionRequest, peer: str) -> RunOutcome:
        """The outcome of a run for `request` from the client at `peer`; SlotsBusy (nothing
        started) when that client, or every client, already waits for as many runs as
        may wait."""
        budget = answer_budget(webhook)
        summary = RunSummary()
        spec_made: list[RunSpec] = []  # the run's spec, once made: its ident names the run
        ticket = self.slots.reserve(peer)
        task = asyncio.ensure_future(
            self._run(webhook, request, summary, budget, spec_made, ticket)
        )
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
                f"{summary.last_task or 'none'}); the run was stopped"
            ),
            duration=budget,
            ident=spec_made[0].ident if spec_made else "",
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

    async def _run(
        self,
        webhook: Webhook,
        request: AdmissionRequest,
        summary: RunSummary,
        budget: float,
        spec_made: list[RunSpec],
        ticket: Ticket,
    ) -> RunOutcome:
        options = self.options
        answers: list[Answer] = []

        def on_event(event: dict[str, Any]) -> None:
            if not answers:
                answer = answer_from_event(event)
                if answer is not None:
                    answers.append(answer)

        plan = RunPlan(
            owner=owner_for(request),
            described=f"webhook={webhook.name} {request.describe()}",
            subject_dir=self.runner_root / "webhooks" / webhook.name,
            role=webhook.role,
            playbook=webhook.playbook,
            extravars=admission_vars(request, webhook),
            verbosity=options.ansible_verbosity,
            timeout=budget + KILL_AFTER,
            keep_artifacts=0,  # rotated here: concurrent runs share the directory
            skip_facts=True,  # a role's facts about this host cost a second, every request
            ansible_args=options.ansible_args,
            writes=webhook.may_write(request.dry_run),
            nice=priority.ADMISSION,  # answered within seconds: before reconciles
        )
        result = await self.player.play(
            plan,
            summary,
            hold=lambda spec: self._holding(spec, spec_made, ticket),
            on_event=on_event,
            rotate=lambda run_dir: self._rotate(run_dir, webhook.max_runner_artifacts),
        )
        answer = _redacted(answers[0], summary) if answers else None
        failure = "" if result.succeeded else f"the role failed: {result.message}"
        return RunOutcome(answer, failure, result.duration, result.ident)

    @contextlib.asynccontextmanager
    async def _holding(
        self, spec: RunSpec, spec_made: list[RunSpec], ticket: Ticket
    ) -> AsyncIterator[None]:
        """A webhook run slot; the run's artifacts stay while it waits and runs."""
        spec_made.append(spec)
        self._in_flight.add(spec.ident)
        try:
            async with ticket:
                yield
        finally:
            self._in_flight.discard(spec.ident)

    def _rotate(self, run_dir: rundir.RunDir, keep: int) -> None:
        """Keep the newest `keep` artifact directories, never one of a run in flight."""
        with contextlib.suppress(OSError):
            entries = sorted(
                (entry for entry in run_dir.artifacts.iterdir() if entry.is_dir()),
                key=lambda entry: entry.stat().st_mtime,
            )
            done = [entry for entry in entries if entry.name not in self._in_flight]
            for entry in done[: max(0, len(done) - keep)]:
                shutil.rmtree(entry, ignore_errors=True)


def _redacted(answer: Answer, summary: RunSummary) -> Answer:
    """What the run read from Secrets never reaches the client in a message or warning."""
    text = summary.redactor.text
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
