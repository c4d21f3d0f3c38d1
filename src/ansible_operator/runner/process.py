"""Run ansible-runner for one reconcile and report what happened.

The run is an `ansible-runner run` process in its own process group and, where
the operator may make one, its own cgroup; its end, a timeout or shutdown
kills every process it started (containment.py), those that left its session
too; so does a stop requested for it (stopping.py: its object was deleted).
Its events arrive through the event receiver while it runs; a run that ends
without `playbook_on_stats` is a failure with a reason taken from its output,
never a silent success. A run that prints more than its output cap is
stopped; one over its memory cap loses the process that went over. What it
keeps on disk is redacted when it ends (redaction.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ansible_operator.runner import cgroups, priority, stopping
from ansible_operator.runner.containment import Containment
from ansible_operator.runner.environment import with_our_python
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.lifetime import die_with_parent
from ansible_operator.runner.output_errors import located_error
from ansible_operator.runner.redaction import redact_artifacts
from ansible_operator.runner.result import RunResult, RunStatus
from ansible_operator.runner.rundir import RunDir
from ansible_operator.values.durations import format_duration
from ansible_operator.values.sizes import format_size

log = logging.getLogger("ansible_operator.runner")

KILL_GRACE_SECONDS = 5.0
RUNNER_EXIT_WAIT = 1.0  # seconds the warm runner may take to exit after its last word


@dataclass(frozen=True)
class RunSpec:
    """How the runner starts one planned run (runner/host.py makes it from the RunPlan)."""

    run_dir: RunDir
    role: Path | None
    playbook: Path | None
    ident: str  # the plan's: names the run's artifacts
    verbosity: int = 2
    timeout: float | None = None
    keep_artifacts: int = 20
    skip_facts: bool = True
    env: dict[str, str] = field(default_factory=dict)
    memory_limit: int | None = None  # bytes for the whole run, where cgroups allow

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "ansible_runner",
            "run",
            str(self.run_dir.path),
            "--ident",
            self.ident,
            "--artifact-dir",
            str(self.run_dir.artifacts),
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


def _error_lines(stdout: Path, limit: int = 8) -> str:
    try:
        text = stdout.read_text(errors="replace")
    except OSError:
        return ""
    if located := located_error(text):  # a playbook that does not parse, at its file:line
        return located
    lines = [line.rstrip() for line in text.splitlines()]
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
    groups = env.get(cgroups.CGROUP_ENV, "")

    def in_the_run() -> None:
        die_with_parent()  # an operator killed with SIGKILL ends its runs
        cgroups.join(groups)  # before anything is started
        priority.lower_this_process(env)

    process = await asyncio.create_subprocess_exec(
        *spec.command(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        preexec_fn=in_the_run,
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
                # The runner exits right after saying so: its end (the
                # connection's) is the run's, and what is left is left over.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(), RUNNER_EXIT_WAIT)
                writer.close()
                return int(rest)
        return None

    return started


async def _kill_run(run: StartedRun, exited: asyncio.Future[int | None], box: Containment) -> None:
    """SIGTERM to the whole run (ansible-runner writes its status), then
    SIGKILL to whatever is left of it."""
    box.signal(run.pid, signal.SIGTERM)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(exited), KILL_GRACE_SECONDS)
    await asyncio.to_thread(box.kill, run.pid)
    run.close()  # a warm run also goes when its connection does
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(exited), KILL_GRACE_SECONDS)


async def execute(
    spec: RunSpec,
    summary: RunSummary,
    *,
    warm_runner: Path | None = None,
    groups: cgroups.RunGroups | None = None,
) -> RunResult:
    """Run and wait. `summary` is fed by the run's event handler meanwhile
    (it reads the output guard, the fold and the redactor; it writes none of them).
    `warm_runner`: the socket of a warm runner to fork the run from;
    `groups`: where the run's cgroup is made (None: no cgroup).
    Raises RunStopped, having killed the run, when the current stop is requested."""
    stop = stopping.current()
    if stop is not None and stop.requested:
        raise stopping.RunStopped(stop.reason)
    started = time.monotonic()
    box = Containment.create(spec.ident, groups, spec.memory_limit)
    env = dict(os.environ)
    env.update(spec.env)
    env.update(box.env())
    env = with_our_python(env)
    try:
        if warm_runner is not None:
            run = await _start_warm(spec, env, warm_runner)
        else:
            run = await _start_process(spec, env)
    except BaseException:
        await asyncio.to_thread(box.close)
        raise
    exited = asyncio.ensure_future(run.wait())
    status: RunStatus
    reason = ""
    return_code: int | None = None
    try:
        ends = {asyncio.ensure_future(summary.guard.exceeded.wait())}
        if stop is not None:
            ends.add(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait({exited, *ends}, timeout=spec.timeout, return_when="FIRST_COMPLETED")
        finally:
            for end in ends:
                end.cancel()
        if exited.done():
            return_code = exited.result()
            status, reason = _ended(spec, summary, run, return_code)
        else:
            await _kill_run(run, exited, box)
            if summary.guard.exceeded.is_set():
                status = "output_limit"
                reason = (
                    f"the run printed more than {format_size(summary.guard.limit or 0)} "
                    f"(--max-run-output; last task: {summary.last_task or 'none'}); "
                    "it was stopped"
                )
            elif stop is not None and stop.requested:
                status = "canceled"
                reason = stop.reason
            else:
                status = "timeout"
                reason = (
                    f"run timed out after {format_duration(spec.timeout or 0)} "
                    f"(last task: {summary.last_task or 'none'}); its processes were killed"
                )
    except asyncio.CancelledError:
        await _kill_run(run, exited, box)
        _finish(spec, summary, box)
        raise
    # What the run left behind (`setsid nohup ... &`) ends with it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGKILL)
    await asyncio.to_thread(box.kill, None)
    run.close()
    out_of_memory = box.out_of_memory()
    await asyncio.to_thread(_finish, spec, summary, box)
    if status == "canceled":
        raise stopping.RunStopped(reason, spec.ident)
    return RunResult.of(
        summary,
        ident=spec.ident,
        status=status,
        return_code=return_code,
        reason=reason,
        duration=time.monotonic() - started,
        out_of_memory=format_size(spec.memory_limit or 0) if out_of_memory else "",
        artifacts=spec.run_dir.artifacts / spec.ident,
    )


def _ended(
    spec: RunSpec, summary: RunSummary, run: StartedRun, return_code: int | None
) -> tuple[RunStatus, str]:
    # The last events may still be in flight on the socket: the plugin posts
    # them synchronously, so they have been received before the process exits.
    if return_code == 0 and summary.stats is not None:
        return "successful", ""
    if summary.stats is not None:
        return "failed", ""
    stdout = spec.run_dir.artifacts / spec.ident / "stdout"
    details = "\n".join(run.errors) or _error_lines(stdout)
    ended = f"exit code {return_code}" if return_code is not None else "the runner vanished"
    return "error", f"the run ended ({ended}) without reporting results" + (
        f": {details}" if details else f"; see {stdout}"
    )


def _finish(spec: RunSpec, summary: RunSummary, box: Containment) -> None:
    box.close()
    redact_artifacts(spec.run_dir.artifacts / spec.ident, summary.redactor)
