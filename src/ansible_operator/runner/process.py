"""Run ansible-runner for one reconcile and report what happened.

The run is an `ansible-runner run` process in its own process group, so a
timeout or shutdown kills the whole tree (ansible-runner, ansible-playbook and
every module process). Its events arrive through the event receiver while it
runs; a run that ends without `playbook_on_stats` is a failure with a reason
taken from its output, never a silent success.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ansible_operator.durations import format_duration
from ansible_operator.runner import proctree
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.forkserver import die_with_parent
from ansible_operator.runner.rundir import RunDir

log = logging.getLogger("ansible_operator.runner")

RunStatus = Literal["successful", "failed", "timeout", "error", "canceled"]
_counter = itertools.count(1)
KILL_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class RunSpec:
    run_dir: RunDir
    role: Path | None
    playbook: Path | None
    verbosity: int = 2
    timeout: float | None = None
    keep_artifacts: int = 20
    skip_facts: bool = True
    env: dict[str, str] = field(default_factory=dict)
    ident: str = field(default_factory=lambda: f"{next(_counter)}-{uuid.uuid4().hex[:8]}")

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "ansible_runner",
            "run",
            str(self.run_dir.path),
            "--ident",
            self.ident,
        ]
        if self.keep_artifacts > 0:
            command += ["--rotate-artifacts", str(self.keep_artifacts)]
        if self.playbook is not None:
            command += ["-p", str(self.playbook)]
        elif self.role is not None:
            command += [
                "--role",
                self.role.name,
                "--roles-path",
                str(self.role.parent),
                "--hosts",
                "localhost",
            ]
            if self.skip_facts:
                command.append("--role-skip-facts")
        else:
            raise ValueError("a run needs a role or a playbook")
        if self.verbosity > 0:
            command.append("-" + "v" * min(self.verbosity, 7))
        return command


@dataclass
class RunResult:
    status: RunStatus
    summary: RunSummary
    return_code: int | None
    reason: str = ""
    duration: float = 0.0
    ident: str = ""

    @property
    def succeeded(self) -> bool:
        stats = self.summary.stats
        return (
            self.status == "successful"
            and stats is not None
            and stats.failures == 0
            and stats.unreachable == 0
        )

    @property
    def message(self) -> str:
        """Why the run failed, for the Failure condition and the Event."""
        if self.succeeded:
            return ""
        if self.status == "timeout":  # whatever the killed tasks reported, this is why
            return self.reason
        if self.summary.stats is not None and self.summary.failure_message:
            return self.summary.failure_message
        return self.reason or f"ansible-runner ended with status {self.status}"


def _error_lines(stdout: Path, limit: int = 8) -> str:
    try:
        lines = [line.rstrip() for line in stdout.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line.strip()]
    errors = [line for line in lines if "ERROR" in line or "error" in line.lower()[:20]]
    chosen = errors[-limit:] if errors else lines[-limit:]
    return "\n".join(chosen)


@dataclass
class StartedRun:
    """A run's process tree, however it was started: its leader leads the
    run's process group."""

    pid: int
    wait: Callable[[], Awaitable[int | None]]  # the exit code; None if unknown
    close: Callable[[], None] = lambda: None
    errors: list[str] = field(default_factory=list)


async def _start_process(spec: RunSpec, env: dict[str, str]) -> StartedRun:
    process = await asyncio.create_subprocess_exec(
        *spec.command(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        preexec_fn=die_with_parent,  # an operator killed with SIGKILL ends its runs
    )
    return StartedRun(process.pid, process.wait)


async def _start_warm(spec: RunSpec, env: dict[str, str], server: Path) -> StartedRun:
    """Ask the warm runner (run_server.py) to fork this run."""
    reader, writer = await asyncio.open_unix_connection(str(server), limit=1 << 20)
    request = {"argv": spec.command()[3:], "env": env, "cwd": str(Path.cwd())}
    writer.write(json.dumps(request).encode() + b"\n")
    await writer.drain()
    answer = (await reader.readline()).split()
    if len(answer) != 2 or answer[0] != b"pid":
        writer.close()
        raise RuntimeError("the warm runner did not start the run")
    started = StartedRun(int(answer[1]), lambda: _exit_code(), writer.close)

    async def _exit_code() -> int | None:
        while line := await reader.readline():
            word, _, rest = line.decode(errors="replace").strip().partition(" ")
            if word == "error":
                started.errors.append(rest)
            elif word == "exit":
                writer.close()
                return int(rest)
        return None

    return started


async def _kill_run(run: StartedRun) -> None:
    """SIGTERM to the whole tree (ansible-runner writes its status), then
    SIGKILL to whatever is left of it."""
    processes = proctree.tree(run.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGTERM)
    proctree.signal_all(processes, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run.wait(), KILL_GRACE_SECONDS)
    processes += proctree.tree(run.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGKILL)
    proctree.signal_all(processes, signal.SIGKILL)
    run.close()  # a warm run also goes when its connection does
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run.wait(), KILL_GRACE_SECONDS)


async def execute(
    spec: RunSpec,
    summary: RunSummary,
    *,
    warm_runner: Path | None = None,
) -> RunResult:
    """Run and wait. `summary` is fed by the event receiver meanwhile.
    `warm_runner`: the socket of a warm runner to fork the run from."""
    started = time.monotonic()
    env = dict(os.environ)
    env.update(spec.env)
    # ansible-runner execs ansible-playbook by name: it must be the one installed
    # beside our interpreter, even when the operator's venv is not on PATH.
    env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
    if warm_runner is not None:
        run = await _start_warm(spec, env, warm_runner)
    else:
        run = await _start_process(spec, env)
    status: RunStatus
    reason = ""
    try:
        return_code = await asyncio.wait_for(run.wait(), spec.timeout)
    except TimeoutError:
        await _kill_run(run)
        return_code = None
        status = "timeout"
        reason = (
            f"run timed out after {format_duration(spec.timeout or 0)} "
            f"(last task: {summary.last_task or 'none'}); its processes were killed"
        )
    except asyncio.CancelledError:
        await _kill_run(run)
        raise
    else:
        # The last events may still be in flight on the socket: the plugin posts
        # them synchronously, so they have been received before the process exits.
        stdout = spec.run_dir.artifacts / spec.ident / "stdout"
        if return_code == 0 and summary.stats is not None:
            status = "successful"
        elif summary.stats is not None:
            status = "failed"
        else:
            status = "error"
            details = "\n".join(run.errors) or _error_lines(stdout)
            ended = f"exit code {return_code}" if return_code is not None else "the runner vanished"
            reason = f"the run ended ({ended}) without reporting results" + (
                f": {details}" if details else f"; see {stdout}"
            )
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.close()
    return RunResult(
        status=status,
        summary=summary,
        return_code=return_code,
        reason=reason,
        duration=time.monotonic() - started,
        ident=spec.ident,
    )
