"""How a run's process is started: the seam between the runner host and the
ways of running.

    Launcher.begin()                      once, as the host starts (behind readiness)
    Launcher.mode() -> RunMode            what runs started now are configured for
    Launcher.start(spec) -> StartedRun    one run's process tree
    Launcher.stop()

`ReferenceLauncher` (here) starts `python -m ansible_runner run` afresh for
each run, as Operator SDK's operator does; `TerminalLauncher` (here, for
`reconcile --debugger`) the same run on the command's terminal, Ansible's
task debugger on. runner/warm/launcher.py's
`WarmLauncher` forks each run from the warm runner, and starts it as the
reference does while the warm runner cannot start. The runner host is given
one (host.py) and knows nothing else of either: nothing of runner/ outside
runner/warm imports runner/warm (tests/unit/test_layers.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from ansible_operator.runner import cgroups, priority
from ansible_operator.runner.configuration import REFERENCE, RunMode, RunSpec
from ansible_operator.runner.lifetime import die_with_parent


@dataclass
class StartedRun:
    """A run's process tree, however it was started: its leader leads the
    run's process group."""

    pid: int
    wait: Callable[[], Awaitable[int | None]]  # the exit code; None if unknown
    close: Callable[[], None] = lambda: None
    errors: list[str] = field(default_factory=list)


class RunStarter(Protocol):
    async def start(self, spec: RunSpec) -> StartedRun:
        """Start the run `spec` describes, `spec.env` its whole environment."""
        ...


class Launcher(RunStarter, Protocol):
    def begin(self) -> None:
        """As the host starts: what runs will need, begun (not awaited)."""
        ...

    async def mode(self) -> RunMode:
        """What a run started now is configured for (waits for what `begin` began)."""
        ...

    async def stop(self) -> None: ...


class ReferenceLauncher:
    """A fresh `python -m ansible_runner run` per run, in a session of its
    own, in the run's cgroup and at its priority before it starts anything."""

    def begin(self) -> None:
        pass

    async def mode(self) -> RunMode:
        return REFERENCE

    async def start(self, spec: RunSpec) -> StartedRun:
        return await self._start(spec.command(), spec.env, terminal=False)

    async def _start(
        self, command: list[str], env: dict[str, str], *, terminal: bool
    ) -> StartedRun:
        groups = env.get(cgroups.CGROUP_ENV, "")
        # Nothing to read or write but its events and artifacts, or this terminal.
        stdio = None if terminal else asyncio.subprocess.DEVNULL

        def in_the_run() -> None:
            die_with_parent()  # an operator killed with SIGKILL ends its runs
            cgroups.join(groups)  # before anything is started
            priority.lower_this_process(env)

        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=stdio,
            stdout=stdio,
            stderr=stdio,
            env=env,
            start_new_session=True,
            preexec_fn=in_the_run,
        )
        return StartedRun(process.pid, process.wait)

    async def stop(self) -> None:
        pass


# Ansible's own setting: the task debugger opens on a failed or unreachable
# task (as `debugger: on_failed` on every task would).
TASK_DEBUGGER_ENV = "ANSIBLE_ENABLE_TASK_DEBUGGER"
TERMINAL_RUNNER = "ansible_operator.runner.terminal"


class TerminalLauncher(ReferenceLauncher):
    """`reconcile --debugger`: each run as the reference's, but on this
    process's terminal (runner/terminal.py: what Ansible prints is shown, what
    is typed goes to it) with Ansible's task debugger on. Its own session
    still (the run's process group is what is killed), so the terminal's
    Ctrl-C reaches Ansible through the run's own pseudo-terminal, not as a
    signal to the run's processes."""

    async def start(self, spec: RunSpec) -> StartedRun:
        env = {**spec.env, TASK_DEBUGGER_ENV: "True"}
        return await self._start(spec.command(runner=TERMINAL_RUNNER), env, terminal=True)
