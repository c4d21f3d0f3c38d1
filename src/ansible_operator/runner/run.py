"""One Ansible run for one object: the only thing the controller calls.

    controller --RunRequest--> Runner.run --> RunResult (+ its RunSummary)

`AnsibleRunner` does the whole run: the proxy grant (an AccessProvider),
the event channel (EventReceiver), the run directory, the event plugin's
environment, the verbosity, the run's cgroup, redaction of the run's
credentials and the summary of its events. Reference or warm mode is one
constructor argument (`warm`). Controller tests use runner/fake.py instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
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
from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.process import RunResult, RunSpec, execute
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.tasklog import TaskLogger
from ansible_operator.runner.warm import WarmProcesses, ansible_environment
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


def credentials(kubeconfig: Mapping[str, Any] | None) -> list[str]:
    """The secrets of a run's kubeconfig: never shown, should a role print them."""
    found = []
    for user in (kubeconfig or {}).get("users") or []:
        settings = (user or {}).get("user") or {}
        found += [str(settings[key]) for key in ("token", "password") if settings.get(key)]
    return found


def chosen_verbosity(request: RunRequest, options: OperatorOptions) -> int:
    """The object's annotation, else the watch's, else the operator's."""
    if request.verbosity is not None:
        return request.verbosity
    if request.watch.ansible_verbosity is not None:
        return request.watch.ansible_verbosity
    return options.ansible_verbosity


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
        self.receiver = receiver
        self.access = access
        self.runner_root = runner_root
        self.run_slots = run_slots
        self.metrics = metrics
        self.warm = warm
        self.run_groups = run_groups
        self.live_output = live_output

    async def run(self, request: RunRequest) -> RunResult:
        watch, options, obj = request.watch, self.options, request.obj
        label = gvk_label(watch)
        described = object_fields(obj)
        owner = owner_of(watch, obj)
        role, playbook = what_to_play(request)
        extravars = extravars_for(request)
        summary = RunSummary()
        task_log = TaskLogger(
            options.ansible_log_events,
            described,
            ansible_output=options.ansible_debug_logs,
            redactor=summary.redactor,
        )
        live_output = self.live_output

        def on_event(event: dict[str, Any]) -> None:
            summary.add(event)
            task_log.handle(event)
            if live_output is not None and event.get("stdout"):
                live_output(summary.redactor.stdout(event))

        access = self.access.grant(owner)
        for credential in credentials(access.kubeconfig):
            summary.redactor.add(credential)
        channel = self.receiver.open_channel(on_event, label=owner.describe())
        ansible_args = options.ansible_args
        if options.check_mode:
            ansible_args = f"{ansible_args} --check --diff".strip()
        interpreter = self.warm.interpreter if self.warm else None
        run_dir = rundir.prepare(
            rundir.object_dir(
                self.runner_root,
                watch.gvk.group,
                watch.gvk.version,
                watch.gvk.kind,
                owner.namespace,
                owner.name,
            ),
            extravars=extravars,
            envvars=access.env,
            kubeconfig=access.kubeconfig,
            ansible_args=ansible_args,
            inventory=options.inventory,
            interpreter=interpreter,
            private=rundir.private_root(self.runner_root),
        )
        keep = (
            request.keep_artifacts
            if request.keep_artifacts is not None
            else watch.max_runner_artifacts
        )
        spec = RunSpec(
            run_dir=run_dir,
            role=role,
            playbook=playbook,
            verbosity=chosen_verbosity(request, options),
            timeout=watch.run_timeout or options.run_timeout,
            keep_artifacts=max(keep, 1),
            skip_facts=options.skip_facts,
            env=self._run_env(channel.token),
            max_output=options.max_run_output,
            memory_limit=options.run_memory_limit,
        )
        in_flight = self.metrics.runs_in_flight.labels(label)
        try:
            async with self.run_slots:
                in_flight.inc()
                try:
                    log.info("run started %s run=%s", described, spec.ident)
                    result = await execute(
                        spec,
                        summary,
                        warm_runner=self.warm.run_socket if self.warm else None,
                        groups=self.run_groups,
                    )
                finally:
                    in_flight.dec()
        finally:
            self.receiver.close_channel(channel)
            access.revoke()
            rundir.remove_secrets(run_dir)
            if keep == 0:
                rundir.rotate_artifacts(run_dir, 0)
        outcome = "succeeded" if result.succeeded else "failed"
        self.metrics.run_duration.labels(label, outcome).observe(result.duration)
        stats = result.summary.stats
        log.info(
            "run %s %s run=%s duration=%.2fs ok=%s changed=%s failures=%s artifacts=%s",
            outcome,
            described,
            spec.ident,
            result.duration,
            stats.ok if stats else "-",
            stats.changed if stats else "-",
            stats.failures if stats else "-",
            run_dir.artifacts / spec.ident,
        )
        return result

    def _run_env(self, token: str) -> dict[str, str]:
        """The event plugin's way back to us, and the Ansible settings of
        every run (pipelining to the warm interpreter in warm mode)."""
        return {
            SOCKET_ENV: str(self.receiver.socket_path),
            TOKEN_ENV: token,
            **ansible_environment(
                roles_path=self.options.ansible_roles_path,
                collections_path=self.options.ansible_collections_path,
                pipelining=self.warm is not None,
            ),
        }
