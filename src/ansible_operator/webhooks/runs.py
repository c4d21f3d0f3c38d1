"""One Ansible run per admission request, answered before the API server gives up.

The same machinery as a reconcile (runner/: the run directory, the event channel, the warm
runner, the run's cgroup, redaction) without what only reconciles need: no status, no
finalizer, no Kubernetes Events, no requeue. The run reaches the API through the proxy with
a grant that may only read, unless the webhook declares `sideEffects: NoneOnDryRun` and the
request is no dry run.

The run has the webhook's `timeoutSeconds`, less a margin, to answer (waiting for a free run
slot included): past it, the request is decided by the failure policy at once, and the run is
killed in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ansible_operator.durations import format_duration
from ansible_operator.kube.types import Owner
from ansible_operator.options import OperatorOptions
from ansible_operator.runner import rundir
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.cgroups import RunGroups
from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.process import RunSpec, execute
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.run import credentials
from ansible_operator.runner.tasklog import TaskLogger
from ansible_operator.runner.warm import WarmProcesses, ansible_environment
from ansible_operator.webhook_entries import Webhook
from ansible_operator.webhooks.answer import Answer, RunOutcome, answer_from_event
from ansible_operator.webhooks.review import AdmissionRequest, admission_vars

log = logging.getLogger("ansible_operator.webhooks")

# Of the webhook's timeoutSeconds, what the answer needs to reach the API server in time.
MARGIN_SHARE = 0.1
MAX_MARGIN = 1.0
# A backstop for the run itself; the answer never waits for it.
KILL_AFTER = 30.0


class AdmissionAccess(Protocol):
    """The proxy's grant (proxy/server.py ApiProxy.grant)."""

    def grant(self, owner: Owner, *, writes: bool = True) -> RunAccess: ...


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
        receiver: EventReceiver,
        access: AdmissionAccess,
        runner_root: Path,
        slots: asyncio.Semaphore,  # concurrent admission runs
        warm: Callable[[], WarmProcesses | None],  # the warm processes, once started
        run_groups: Callable[[], RunGroups | None],
    ) -> None:
        self.options = options
        self.receiver = receiver
        self.access = access
        self.runner_root = runner_root
        self.slots = slots
        self.warm = warm
        self.run_groups = run_groups
        self._in_flight: set[str] = set()  # idents whose artifacts must stay
        self._background: set[asyncio.Future[Any]] = set()

    async def run(self, webhook: Webhook, request: AdmissionRequest) -> RunOutcome:
        budget = answer_budget(webhook)
        summary = RunSummary()
        spec_made: list[RunSpec] = []  # the run's spec, once made: its ident names the run
        task = asyncio.ensure_future(self._run(webhook, request, summary, budget, spec_made))
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
    ) -> RunOutcome:
        options = self.options
        described = f"webhook={webhook.name} {request.describe()}"
        answers: list[Answer] = []
        task_log = TaskLogger(
            options.ansible_log_events,
            described,
            ansible_output=options.ansible_debug_logs,
            redactor=summary.redactor,
        )

        def on_event(event: dict[str, Any]) -> None:
            summary.add(event)
            task_log.handle(event)
            if not answers:
                answer = answer_from_event(event)
                if answer is not None:
                    answers.append(answer)

        owner = owner_for(request)
        access = self.access.grant(owner, writes=webhook.may_write(request.dry_run))
        for credential in credentials(access.kubeconfig):
            summary.redactor.add(credential)
        channel = self.receiver.open_channel(on_event, label=described)
        warm = self.warm()
        run_dir: rundir.RunDir | None = None
        ident = ""
        try:
            run_dir = rundir.prepare(
                self.runner_root / "webhooks" / webhook.name,
                extravars=admission_vars(request, webhook),
                envvars=access.env,
                kubeconfig=access.kubeconfig,
                ansible_args=options.ansible_args,
                inventory=options.inventory,
                interpreter=warm.interpreter if warm else None,
                private=rundir.private_root(self.runner_root),
            )
            spec = RunSpec(
                run_dir=run_dir,
                role=webhook.role,
                playbook=webhook.playbook,
                verbosity=options.ansible_verbosity,
                timeout=budget + KILL_AFTER,
                keep_artifacts=0,  # rotated here: concurrent runs share the directory
                skip_facts=True,  # a role's facts about this host cost a second, every request
                env=self._run_env(channel.token, warm),
                max_output=options.max_run_output,
                memory_limit=options.run_memory_limit,
            )
            ident = spec.ident
            spec_made.append(spec)
            self._in_flight.add(ident)
            async with self.slots:
                result = await execute(
                    spec,
                    summary,
                    warm_runner=warm.run_socket if warm else None,
                    groups=self.run_groups() or None,
                )
        finally:
            self.receiver.close_channel(channel)
            access.revoke()
            self._in_flight.discard(ident)
            if run_dir is not None:
                rundir.remove_secrets(run_dir)
                await asyncio.to_thread(self._rotate, run_dir, webhook.max_runner_artifacts)
        answer = _redacted(answers[0], summary) if answers else None
        failure = "" if result.succeeded else f"the role failed: {result.message}"
        return RunOutcome(answer, failure, result.duration, result.ident)

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

    def _run_env(self, token: str, warm: WarmProcesses | None) -> dict[str, str]:
        return {
            SOCKET_ENV: str(self.receiver.socket_path),
            TOKEN_ENV: token,
            **ansible_environment(
                roles_path=self.options.ansible_roles_path,
                collections_path=self.options.ansible_collections_path,
                pipelining=warm is not None,
            ),
        }


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
