"""One Ansible run for one object: the only thing the controller calls.

    controller --RunRequest--> Runner.run --> RunResult (+ its RunSummary)

`AnsibleRunner` turns the request into a RunPlan (the object's run directory,
the role or finalizer, its extra vars, verbosity, timeout, check mode,
artifacts to keep) and plays it (play.py: the proxy grant, the event
channel, the run directory, the run's cgroup, redaction), within the global
cap on concurrent runs, with the run metrics and log lines of a reconcile.
Reference or warm mode is one constructor argument (`warm`). Controller
tests use runner/fake.py instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ansible_operator import params
from ansible_operator.kube.types import Owner
from ansible_operator.metrics import Metrics
from ansible_operator.options import OperatorOptions
from ansible_operator.runner import rundir
from ansible_operator.runner.access import AccessProvider
from ansible_operator.runner.cgroups import RunGroups
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.play import AnsiblePlayer, RunPlan
from ansible_operator.runner.process import RunResult, RunSpec
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.warm.processes import WarmProcesses
from ansible_operator.settings.precedence import Effective, Overrides, effective
from ansible_operator.watches import Watch

log = logging.getLogger("ansible_operator.controller")

LiveOutput = Callable[[str], None]


@dataclass(frozen=True)
class RunRequest:
    """What a run is about: the watch, the object (as the controller last
    wrote it), whether this is its finalizer run, and the object's own
    settings from its annotations (None: the watch's, then the operator's)."""

    watch: Watch
    obj: Mapping[str, Any]
    deleting: bool = False
    verbosity: int | None = None
    keep_artifacts: int | None = None


class Runner(Protocol):
    async def run(self, request: RunRequest) -> RunResult: ...


def object_fields(obj: Mapping[str, Any]) -> str:
    """An object as log lines name it."""
    metadata = obj.get("metadata") or {}
    return (
        f"kind={obj.get('kind')} namespace={metadata.get('namespace') or ''} "
        f"name={metadata.get('name')}"
    )


def gvk_label(watch: Watch) -> str:
    return f"{watch.gvk.group or 'core'}/{watch.gvk.version}/{watch.gvk.kind}"


def owner_of(watch: Watch, obj: Mapping[str, Any]) -> Owner:
    metadata = obj["metadata"]
    return Owner(
        group=watch.gvk.group,
        version=watch.gvk.version,
        kind=watch.gvk.kind,
        namespace=metadata.get("namespace") or "",
        name=metadata["name"],
        uid=metadata.get("uid", ""),
    )


def settings_for(request: RunRequest, options: OperatorOptions) -> Effective:
    """The object's annotations given in the request, over the watch's, over the flags."""
    overrides = Overrides(verbosity=request.verbosity, max_runner_artifacts=request.keep_artifacts)
    return effective(request.watch, options.runs, options.ansible, overrides)


def what_to_play(request: RunRequest) -> tuple[Path | None, Path | None]:
    """(role, playbook): a finalizer's own role or playbook when it has one."""
    watch = request.watch
    finalizer = watch.finalizer if request.deleting else None
    if finalizer is not None and (finalizer.role or finalizer.playbook):
        return finalizer.role, finalizer.playbook
    return watch.role, watch.playbook


def extravars_for(request: RunRequest) -> dict[str, Any]:
    watch = request.watch
    finalizer = watch.finalizer if request.deleting else None
    return params.build_extravars(
        dict(request.obj),
        group=watch.gvk.group,
        kind=watch.gvk.kind,
        snake_case=watch.snake_case_parameters,
        unsafe=watch.mark_unsafe,
        watch_vars=watch.vars,
        finalizer_vars=finalizer.vars if finalizer is not None else None,
    )


class AnsibleRunner:
    """Runs ansible-runner for real, in reference mode (a fresh process per
    run) or, given `warm`, forked from the warm processes."""

    def __init__(
        self,
        *,
        options: OperatorOptions,
        receiver: EventReceiver,
        access: AccessProvider,
        runner_root: Path,
        run_slots: asyncio.Semaphore,  # the global cap on concurrent Ansible runs
        metrics: Metrics,
        warm: WarmProcesses | None = None,
        run_groups: RunGroups | None = None,  # where runs get cgroups (None: not here)
        live_output: LiveOutput | None = None,  # `reconcile`: Ansible's own output
    ) -> None:
        self.options = options
        self.runner_root = runner_root
        self.run_slots = run_slots
        self.metrics = metrics
        self.live_output = live_output
        self.player = AnsiblePlayer(
            options=options,
            receiver=receiver,
            access=access,
            runner_root=runner_root,
            warm=lambda: warm,
            run_groups=lambda: run_groups,
        )

    def plan(self, request: RunRequest, settings: Effective | None = None) -> RunPlan:
        """The run a reconcile asks for."""
        watch, options = request.watch, self.options
        owner = owner_of(watch, request.obj)
        role, playbook = what_to_play(request)
        settings = settings or settings_for(request, options)
        ansible_args = options.ansible_args
        if options.check_mode:
            ansible_args = f"{ansible_args} --check --diff".strip()
        subject_dir = rundir.object_dir(
            self.runner_root,
            watch.gvk.group,
            watch.gvk.version,
            watch.gvk.kind,
            owner.namespace,
            owner.name,
        )
        return RunPlan(
            owner=owner,
            described=object_fields(request.obj),
            subject_dir=subject_dir,
            role=role,
            playbook=playbook,
            extravars=extravars_for(request),
            verbosity=settings.verbosity,
            timeout=settings.run_timeout,
            # 0 keeps none: ansible-runner keeps at least one, rotated away after the run.
            keep_artifacts=max(settings.keep_artifacts, 1),
            skip_facts=options.skip_facts,
            ansible_args=ansible_args,
            nice=options.reconcile_run_nice,
        )

    async def run(self, request: RunRequest) -> RunResult:
        settings = settings_for(request, self.options)
        plan = self.plan(request, settings)
        label = gvk_label(request.watch)
        summary = RunSummary()
        live_output = self.live_output

        def show(event: dict[str, Any]) -> None:
            if live_output is not None and event.get("stdout"):
                live_output(summary.redactor.stdout(event))

        specs: list[RunSpec] = []
        result = await self.player.play(
            plan,
            summary,
            hold=lambda spec: self._holding(spec, plan, label, specs),
            on_event=show,
            rotate=None if settings.keep_artifacts else _remove_artifacts,
        )
        outcome = "succeeded" if result.succeeded else "failed"
        self.metrics.run_duration.labels(label, outcome).observe(result.duration)
        stats = result.summary.stats
        log.info(
            "run %s %s run=%s duration=%.2fs ok=%s changed=%s failures=%s artifacts=%s",
            outcome,
            plan.described,
            result.ident,
            result.duration,
            stats.ok if stats else "-",
            stats.changed if stats else "-",
            stats.failures if stats else "-",
            specs[0].run_dir.artifacts / result.ident,
        )
        return result

    @contextlib.asynccontextmanager
    async def _holding(
        self, spec: RunSpec, plan: RunPlan, label: str, specs: list[RunSpec]
    ) -> AsyncIterator[None]:
        """A slot of the global cap, counted in flight while it runs."""
        specs.append(spec)
        in_flight = self.metrics.runs_in_flight.labels(label)
        async with self.run_slots:
            in_flight.inc()
            try:
                log.info("run started %s run=%s", plan.described, spec.ident)
                yield
            finally:
                in_flight.dec()


def _remove_artifacts(run_dir: rundir.RunDir) -> None:
    rundir.rotate_artifacts(run_dir, 0)
