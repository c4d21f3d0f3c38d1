"""One Ansible run, whoever asks for it: a reconcile (run.py) or an admission request
(webhooks/runs.py).

    RunPlan --AnsiblePlayer.play--> RunResult

The player does what every run needs, in this order: the proxy grant (its credentials
taught to the run's redactor), the event channel, the task log, the run directory, the
event plugin's environment, `execute` (warm runner, the run's cgroup) and, whatever
happens, the cleanup: channel closed, grant revoked, the run's secrets removed, the
artifacts rotated. What differs between callers is data (the plan) or one of two hooks:
what a run holds while it executes (a run slot, a count of runs in flight) and how its
artifacts are rotated afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.kube.types import Owner
from ansible_operator.options import OperatorOptions
from ansible_operator.runner import priority, rundir
from ansible_operator.runner.access import AccessProvider
from ansible_operator.runner.cgroups import RunGroups
from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.process import RunResult, RunSpec, execute
from ansible_operator.runner.receiver import EventReceiver, EventSink
from ansible_operator.runner.tasklog import TaskLogger
from ansible_operator.runner.warm.processes import WarmProcesses, ansible_environment

# What a run holds while it executes, given its spec (whose ident names the run).
RunHold = Callable[[RunSpec], AbstractAsyncContextManager[object]]
# Rotates the artifacts once the run is over (called in a thread).
Rotation = Callable[[rundir.RunDir], None]


@dataclass(frozen=True)
class RunPlan:
    """What one run plays, with what, for whom, and where it leaves its artifacts."""

    owner: Owner  # whom the proxy grant acts for
    described: str  # the run's subject as log lines name it
    subject_dir: Path  # of what the run is about; artifacts in <subject_dir>/artifacts/<ident>
    role: Path | None
    playbook: Path | None
    extravars: dict[str, Any]
    verbosity: int
    timeout: float | None
    keep_artifacts: int  # ansible-runner's own rotation (0: none; see `rotate`)
    skip_facts: bool
    ansible_args: str = ""
    writes: bool = True  # False: a grant that may only read through the proxy
    nice: int = priority.RECONCILE  # how far its processes yield the CPU (priority.py)


def credentials(kubeconfig: Mapping[str, Any] | None) -> list[str]:
    """The secrets of a run's kubeconfig: never shown, should a role print them."""
    found = []
    for user in (kubeconfig or {}).get("users") or []:
        settings = (user or {}).get("user") or {}
        found += [str(settings[key]) for key in ("token", "password") if settings.get(key)]
    return found


@dataclass(frozen=True, kw_only=True)
class AnsiblePlayer:
    """Plays RunPlans with one event receiver and one proxy. `warm` and `run_groups`
    are asked at each run: the warm processes may start after the player is made."""

    options: OperatorOptions
    receiver: EventReceiver
    access: AccessProvider
    runner_root: Path
    warm: Callable[[], WarmProcesses | None]
    run_groups: Callable[[], RunGroups | None]  # where runs get cgroups (None: not here)

    async def play(
        self,
        plan: RunPlan,
        summary: RunSummary,
        *,
        hold: RunHold,
        on_event: EventSink | None = None,  # after the summary and the task log saw it
        rotate: Rotation | None = None,
    ) -> RunResult:
        """Run `plan`, feeding `summary` with its events, and clean up after it."""
        options = self.options
        task_log = TaskLogger(
            options.ansible_log_events,
            plan.described,
            ansible_output=options.ansible_debug_logs,
            redactor=summary.redactor,
        )

        def handle(event: dict[str, Any]) -> None:
            summary.add(event)
            task_log.handle(event)
            if on_event is not None:
                on_event(event)

        warm = self.warm()
        access = self.access.grant(plan.owner, writes=plan.writes)
        for credential in credentials(access.kubeconfig):
            summary.redactor.add(credential)
        channel = self.receiver.open_channel(handle, label=plan.described)
        run_dir: rundir.RunDir | None = None
        try:
            run_dir = rundir.prepare(
                plan.subject_dir,
                extravars=plan.extravars,
                envvars=access.env,
                kubeconfig=access.kubeconfig,
                ansible_args=plan.ansible_args,
                inventory=options.inventory,
                interpreter=warm.interpreter if warm else None,
                private=rundir.private_root(self.runner_root),
            )
            spec = RunSpec(
                run_dir=run_dir,
                role=plan.role,
                playbook=plan.playbook,
                verbosity=plan.verbosity,
                timeout=plan.timeout,
                keep_artifacts=plan.keep_artifacts,
                skip_facts=plan.skip_facts,
                env=self._run_env(channel.token, warm, plan.nice),
                max_output=options.max_run_output,
                memory_limit=options.run_memory_limit,
            )
            async with hold(spec):
                return await execute(
                    spec,
                    summary,
                    warm_runner=warm.run_socket if warm else None,
                    groups=self.run_groups() or None,
                )
        finally:
            self.receiver.close_channel(channel)
            access.revoke()
            if run_dir is not None:
                rundir.remove_secrets(run_dir)
                if rotate is not None:
                    await asyncio.to_thread(rotate, run_dir)

    def _run_env(self, token: str, warm: WarmProcesses | None, nice: int) -> dict[str, str]:
        """The event plugin's way back to us, the run's priority, and the Ansible
        settings of every run (pipelining to the warm interpreter in warm mode)."""
        return {
            SOCKET_ENV: str(self.receiver.socket_path),
            TOKEN_ENV: token,
            priority.NICE_ENV: str(nice),
            **ansible_environment(
                roles_path=self.options.ansible_roles_path,
                collections_path=self.options.ansible_collections_path,
                pipelining=warm is not None,
            ),
        }
