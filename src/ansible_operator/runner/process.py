"""Run ansible-runner for one reconcile and report what happened.

The run is an `ansible-runner run` process, started by the launcher given
(launcher.py: a fresh one, or a fork of the warm runner), in its own process group and, where
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
import dataclasses
import logging
import os
import signal
import time
from pathlib import Path

from ansible_operator.runner import cgroups, stopping
from ansible_operator.runner.configuration import RunSpec
from ansible_operator.runner.containment import Containment
from ansible_operator.runner.environment import with_our_python
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.launcher import ReferenceLauncher, RunStarter, StartedRun
from ansible_operator.runner.output_errors import located_error
from ansible_operator.runner.redaction import redact_artifacts
from ansible_operator.runner.result import RunResult, RunStatus
from ansible_operator.values.durations import format_duration
from ansible_operator.values.sizes import format_size

log = logging.getLogger("ansible_operator.runner")

KILL_GRACE_SECONDS = 5.0


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
    launcher: RunStarter | None = None,
    groups: cgroups.RunGroups | None = None,
) -> RunResult:
    """Run and wait. `summary` is fed by the run's event handler meanwhile
    (it reads the output guard, the fold and the redactor; it writes none of them).
    `launcher`: what starts the run's process (default: a fresh ansible-runner);
    `groups`: where the run's cgroup is made (None: no cgroup).
    Raises RunStopped, having killed the run, when the current stop is requested."""
    stop = stopping.current()
    if stop is not None and stop.requested:
        raise stopping.RunStopped(stop.reason)
    started = time.monotonic()
    box = Containment.create(spec.ident, groups, spec.memory_limit)
    # The operator's environment, the run's, and its marks (containment.py).
    env = with_our_python({**os.environ, **spec.env, **box.env()}, spec.python)
    launcher = launcher if launcher is not None else ReferenceLauncher()
    try:
        run = await launcher.start(dataclasses.replace(spec, env=env))
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
