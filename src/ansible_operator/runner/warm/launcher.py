"""The warm way of running (a Launcher, runner/launcher.py): each run forked
from the warm runner.

The warm processes (processes.py) start behind readiness when the host
begins, and are replaced when they exit (keeper.py); a run waits for them.
Runs started while they are up are configured for them (`RunMode` "warm":
modules piped to the warm module interpreter's shim, when that is on); if
they cannot start, runs start as the reference's do, slower, never broken.
The launcher also tells the operator's metrics what the accelerations are
and how often each was used, across the warm runners it started, and the
pid of the warm runner now (0 while there is none).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner.configuration import (
    REFERENCE,
    RunMode,
    RunSpec,
    Surroundings,
    run_ansible_environment,
)
from ansible_operator.runner.launcher import ReferenceLauncher, StartedRun
from ansible_operator.runner.warm.keeper import WarmKeeper
from ansible_operator.runner.warm.processes import WarmProcesses, start_warm_processes
from ansible_operator.runner.warm.zygote import WarmZygote
from ansible_operator.settings import Settings

log = logging.getLogger("ansible_operator.manager")

# The warm runner imports Ansible as a run in warm mode gets it.
WARM = RunMode("warm", pipelining=True)


def added(counts: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    return {name: counts.get(name, 0) + more.get(name, 0) for name in {*counts, *more}}


class WarmLauncher:
    def __init__(
        self,
        *,
        settings: Settings,
        scratch: Path,  # private (0700): the warm processes' sockets and files
        metrics: Metrics,
        targets: Sequence[Mapping[str, str]] = (),  # roles and playbooks the warm runner preloads
        zygote: WarmZygote | None = None,  # the operator's fork to make the warm runner of
    ) -> None:
        self.settings = settings
        self.scratch = scratch
        self.metrics = metrics
        self.targets = [dict(target) for target in targets]
        self.zygote = zygote
        self._keeper = WarmKeeper(self._start_processes, self._replaced)
        self._reference = ReferenceLauncher()
        # The acceleration hits counted by warm runners that exited: their
        # successors count from zero, the metric goes on from these.
        self._hits_before: dict[str, int] = {}

    def begin(self) -> None:
        # Behind readiness: the operator serves and fills its caches while
        # the warm runner imports Ansible (seconds); the first run waits for it.
        self._keeper.begin()

    async def processes(self) -> WarmProcesses | None:
        """The warm processes, once started (None: they did not start)."""
        return await self._keeper.current()

    async def mode(self) -> RunMode:
        warm = await self.processes()
        if warm is None:
            return REFERENCE
        return RunMode(WARM.name, interpreter=warm.interpreter, pipelining=WARM.pipelining)

    async def start(self, spec: RunSpec) -> StartedRun:
        warm = await self.processes()
        return await (warm or self._reference).start(spec)

    async def stop(self) -> None:
        await self._keeper.stop()

    async def _start_processes(self) -> WarmProcesses | None:
        run_env = run_ansible_environment(self.settings, WARM, Surroundings.here())
        try:
            warm = await start_warm_processes(
                self.scratch,
                run_env,
                self.targets,
                self.settings.runs.disabled_accelerations,
                zygote=self.zygote,
            )
        except (RuntimeError, OSError) as error:
            # Slower, never broken: runs start ansible-runner afresh, as Operator SDK's do.
            log.error("%s: running in reference mode instead", error)
            return None
        self.metrics.warm_runner_pid.set(warm.process.pid)
        before = self._hits_before
        self.metrics.track_accelerations(
            {name: verdict.on for name, verdict in warm.accelerations.items()},
            lambda: added(before, warm.hits()),
        )
        return warm

    def _replaced(self, gone: WarmProcesses) -> None:
        self.metrics.warm_runner_pid.set(0)
        self.metrics.warm_runner_restarts.inc()
        self._hits_before = added(self._hits_before, gone.hits())
