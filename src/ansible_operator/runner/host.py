"""The runner's face: one host per operator process, every run goes through it.

    RunnerHost.start()                   the runner directory claimed, the event
                                         receiver, the runs' cgroups, the
                                         launcher begun (the warm processes)
    RunnerHost.run(plan) -> RunResult    a reconcile's run or an admission run
    RunnerHost.stop()

Started once, before leader election (admission webhooks answer on every
replica), and shared by reconciles and webhooks: one event receiver, one
launcher, one proxy (the `access` given) per process. How runs are started is
the launcher given (launcher.py: the reference's, or runner/warm's), one
constructor argument; the host knows nothing else of it.

A run, in this order: what the launcher offers now (its RunMode), the proxy
grant (what the plan may write and own; its credentials taught to the run's
redactor), the event channel, the task log, the run's configuration
(configuration.py, from the plan and the settings), its directory, a run
slot when the plan is capped (by priority: slots.py), `execute` (the
launcher, the run's cgroup) and, whatever happens, the cleanup: channel
closed, grant revoked, the run's secrets removed, the artifacts rotated.
What differs between callers is data: the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner import cgroups, disk_budget, rundir
from ansible_operator.runner.access import AccessProvider
from ansible_operator.runner.configuration import (
    EventAddress,
    RunPlace,
    Surroundings,
    configure,
    host_rotates,
)
from ansible_operator.runner.disk_budget import RESCAN_INTERVAL, DiskBudget, Limits, Pruned
from ansible_operator.runner.events import EventFold, OutputGuard, RunSummary
from ansible_operator.runner.launcher import Launcher, ReferenceLauncher
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.process import execute
from ansible_operator.runner.receiver import EventReceiver, EventSink
from ansible_operator.runner.redaction import Redactor
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.slots import RunSlots
from ansible_operator.runner.tasklog import TaskLogger
from ansible_operator.settings import Settings

log = logging.getLogger("ansible_operator.controller")

LiveOutput = Callable[[str], None]
# How an event's output is shown live (default: Redactor.stdout).
ShownOutput = Callable[[Mapping[str, Any], Redactor], str]


PRUNED_LINES = 20  # artifact directories named one by one per prune; the rest counted


def subject_fields(root: Path, artifacts: Path) -> str:
    """Whose artifacts these are, as log lines name objects (rundir.object_dir's
    layout), or the subject's path for others (admission webhooks)."""
    try:
        parts = artifacts.parent.relative_to(root).parts
    except ValueError:
        parts = ()
    if len(parts) == 5:
        group, version, kind, namespace, name = parts
        namespace = "" if namespace == "_cluster" else namespace
        return f"kind={kind} namespace={namespace} name={name} group={group} version={version}"
    return f"subject={'/'.join(parts) or artifacts.parent}"


def credentials(kubeconfig: Mapping[str, Any] | None) -> list[str]:
    """The secrets of a run's kubeconfig: never shown, should a role print them."""
    found = []
    for user in (kubeconfig or {}).get("users") or []:
        settings = (user or {}).get("user") or {}
        found += [str(settings[key]) for key in ("token", "password") if settings.get(key)]
    return found


class RunnerHost:
    """Runs RunPlans, each started by `launcher` (default: the reference's, a
    fresh ansible-runner per run)."""

    def __init__(
        self,
        *,
        settings: Settings,
        access: AccessProvider,  # the proxy: each run's grant
        runner_root: Path,  # where the runs' subjects keep their run directories
        scratch: Path,  # private (0700): the event socket, the warm processes
        metrics: Metrics,
        max_runs: int,  # the operator's cap on concurrent capped runs
        launcher: Launcher | None = None,  # how runs are started (launcher.py)
        contain: bool = True,  # a cgroup per run, where the operator may make them
        live_output: LiveOutput | None = None,  # `reconcile`: Ansible's own output
        shown: ShownOutput | None = None,  # `reconcile --check`: its diffs cleaned
    ) -> None:
        self.settings = settings
        self.access = access
        self.runner_root = runner_root
        self.scratch = scratch
        self.metrics = metrics
        self.launcher: Launcher = launcher if launcher is not None else ReferenceLauncher()
        self.contain = contain
        self.live_output = live_output
        self.shown: ShownOutput = shown or (lambda event, redactor: redactor.stdout(event))
        self.receiver = EventReceiver(scratch / "events.sock", on_metric=metrics.user_metric)
        # Given by priority, the context's (slots.py): an edit's run before a list's.
        self._run_slots = RunSlots(max_runs)
        self._run_groups: cgroups.RunGroups | None = None
        self._runner_dir: rundir.RunnerDirClaim | None = None
        self._in_flight: set[str] = set()  # idents whose artifacts must stay
        limits = Limits(settings.runs.runner_dir_max_size, settings.runs.runner_dir_max_files)
        # None: no cap, and no tally (nor its walk of the directory at start).
        self.disk: DiskBudget | None = None if limits.unlimited else DiskBudget(runner_root, limits)
        self._rescans: asyncio.Task[None] | None = None

    # ----- lifecycle -----------------------------------------------------------
    async def start(self) -> None:
        # Before any run: a killed operator's runs left their inputs here.
        self._runner_dir = await asyncio.to_thread(rundir.claim, self.runner_root)
        if self.disk is not None:
            # What earlier operators left counts, and may be over a lowered cap.
            await asyncio.to_thread(self._rescan)
            self._rescans = asyncio.create_task(self._rescan_now_and_then())
        await self.receiver.start()
        if self.contain:
            # Runs of an operator killed earlier may have left processes.
            await asyncio.to_thread(cgroups.remove_stale)
            self._run_groups = cgroups.RunGroups()
        self.launcher.begin()

    async def stop(self) -> None:
        await self.launcher.stop()
        if self._rescans is not None:
            self._rescans.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rescans
            self._rescans = None
        await self.receiver.stop()
        if self._run_groups is not None:
            await asyncio.to_thread(self._run_groups.close)
            self._run_groups = None
        if self._runner_dir is not None:
            self._runner_dir.release()
            self._runner_dir = None

    # ----- one run -------------------------------------------------------------
    async def run(self, plan: RunPlan, *, on_event: EventSink | None = None) -> RunResult:
        """Play `plan` and clean up after it. `on_event` hears each of its events
        after the run's summary and task log did. Raises RunStopped (stopping.py)
        when the reconcile it runs for is stopped; CancelledError kills the run."""
        settings = self.settings
        mode = await self.launcher.mode()
        access = self.access.grant(
            plan.owner, writes=plan.writes, owns=plan.owns, dry_run=plan.dry_run
        )
        # What the run must not let out: its credentials, then what its events teach.
        redactor = Redactor(public=(plan.owner.namespace, plan.owner.name))
        for credential in credentials(access.kubeconfig):
            redactor.add(credential)
        # Written by `handle` alone, for each event; the process only reads it.
        summary = RunSummary(
            redactor=redactor,
            guard=OutputGuard(settings.runs.max_run_output),
            fold=EventFold(refusals=access.refusals, coercions=access.coercions),
        )
        task_log = TaskLogger(
            settings.ansible.log_events,
            plan.described,
            ansible_output=settings.ansible.debug_logs,
            redactor=redactor,
        )
        live_output, shown = self.live_output, self.shown

        def handle(event: dict[str, Any]) -> None:
            summary.add(event)
            task_log.handle(event)
            if live_output is not None and event.get("stdout"):
                live_output(shown(event, redactor))
            if on_event is not None:
                on_event(event)

        channel = self.receiver.open_channel(handle, label=plan.described)
        redactor.add(channel.token)  # the run's key to the event receiver
        self._in_flight.add(plan.ident)
        artifacts = self.runner_root / plan.subject / rundir.ARTIFACTS
        if self.disk is not None:
            self.disk.begin(plan.ident, artifacts)  # before its directories are made
        run_dir: rundir.RunDir | None = None
        try:
            config = configure(
                plan,
                settings,
                mode=mode,
                access=access,
                events=EventAddress(self.receiver.socket_path, channel.token),
                place=RunPlace(self.runner_root, rundir.new_name()),
                surroundings=Surroundings.here(),
            )
            run_dir = config.spec.run_dir  # removed below, even if writing it fails
            rundir.write(run_dir, config.inputs)
            async with self._slot(plan):
                if self.disk is not None:  # in the slot: room for runs that run, not wait
                    await asyncio.to_thread(self._make_room, plan, run_dir)
                result = await execute(
                    config.spec,
                    summary,
                    launcher=self.launcher,
                    groups=self._run_groups or None,
                )
        finally:
            self.receiver.close_channel(channel)
            access.revoke()
            self._in_flight.discard(plan.ident)
            try:
                if run_dir is not None:
                    rundir.remove_secrets(run_dir)
                    if host_rotates(plan):
                        await asyncio.to_thread(self._rotate, run_dir, plan.keep_artifacts)
            finally:
                if self.disk is not None:  # cancelled or not: it is no longer in flight
                    await asyncio.to_thread(self._settle, plan, artifacts)
        if access.owner_conditions:
            result = dataclasses.replace(result, owner_conditions=dict(access.owner_conditions))
        if plan.capped:
            self._report(plan, result)
        return result

    @contextlib.asynccontextmanager
    async def _slot(self, plan: RunPlan) -> AsyncIterator[None]:
        """A capped run: one of the host's slots, counted in flight while it runs."""
        if not plan.capped:
            yield
            return
        in_flight = self.metrics.runs_in_flight.labels(plan.label)
        async with self._run_slots.held():
            in_flight.inc()
            try:
                log.info("run started %s run=%s", plan.described, plan.ident)
                yield
            finally:
                in_flight.dec()

    def _report(self, plan: RunPlan, result: RunResult) -> None:
        outcome = "succeeded" if result.succeeded else "failed"
        self.metrics.run_duration.labels(plan.label, outcome).observe(result.duration)
        stats = result.stats
        log.info(
            "run %s %s run=%s duration=%.2fs ok=%s changed=%s failures=%s artifacts=%s",
            outcome,
            plan.described,
            result.ident,
            result.duration,
            stats.ok if stats else "-",
            stats.changed if stats else "-",
            stats.failures if stats else "-",
            result.artifacts,
        )

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

    # ----- the runner directory's cap (runner/disk_budget.py) -----------------
    def _make_room(self, plan: RunPlan, run_dir: rundir.RunDir) -> None:
        """As a run starts: room held for its inputs and artifacts, the oldest
        pruned to make it."""
        assert self.disk is not None
        self.disk.reserve(plan.ident, disk_budget.measure(run_dir.path))
        self._pruned(self.disk.prune(), plan)

    def _settle(self, plan: RunPlan, artifacts: Path) -> None:
        """After a run: its room given back, what it wrote counted, the cap kept."""
        assert self.disk is not None
        self.disk.settle(artifacts, plan.ident)
        self._pruned(self.disk.prune(), plan)

    def _rescan(self) -> None:
        assert self.disk is not None
        usage = self.disk.rescan()
        log.info(
            "runner directory measured runner_dir=%s bytes=%d files=%d artifacts=%d",
            self.runner_root,
            usage.bytes,
            usage.files,
            len(self.disk.artifacts()),
        )
        self._pruned(self.disk.prune(), None)

    async def _rescan_now_and_then(self) -> None:
        """The tally walked afresh now and then: files it did not see written
        (a person's, another operator's sharing the directory) count too."""
        while True:
            await asyncio.sleep(RESCAN_INTERVAL)
            try:
                await asyncio.to_thread(self._rescan)
            except OSError as error:
                log.warning(
                    "runner directory not measured runner_dir=%s error=%s", self.runner_root, error
                )

    def _pruned(self, pruned: Pruned, plan: RunPlan | None) -> None:
        """Say what went: a line per artifact directory, one for the whole, the metrics."""
        assert self.disk is not None
        usage = self.disk.usage
        self.metrics.runner_dir_bytes.set(usage.bytes)
        self.metrics.runner_dir_files.set(usage.files)
        if not pruned.artifacts and not pruned.still_over:
            return
        self.metrics.runner_artifacts_pruned.inc(len(pruned.artifacts))
        for artifact in pruned.artifacts[:PRUNED_LINES]:
            log.info(
                "pruned run artifacts over the runner directory's cap %s run=%s reason=%s "
                "bytes=%d files=%d path=%s",
                subject_fields(self.runner_root, artifact.subject),
                artifact.ident,
                pruned.reason,
                artifact.usage.bytes,
                artifact.usage.files,
                artifact.path,
            )
        limits = self.disk.limits
        log.log(
            logging.WARNING if pruned.still_over else logging.INFO,
            "runner directory over its cap: pruned the oldest artifacts runner_dir=%s reason=%s "
            "artifacts=%d newest_of_their_object=%d freed_bytes=%d freed_files=%d "
            "bytes=%d files=%d max_bytes=%s max_files=%s still_over=%s for_run=%s",
            self.runner_root,
            pruned.reason,
            len(pruned.artifacts),
            pruned.newest,
            pruned.freed.bytes,
            pruned.freed.files,
            usage.bytes,
            usage.files,
            limits.max_bytes,
            limits.max_files,
            pruned.still_over,
            plan.ident if plan else "-",
        )
