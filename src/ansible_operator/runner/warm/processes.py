"""Warm runner mode: the two long-lived helper processes runs fork from.

- the warm runner (`run_server.py`): each run is a fork of it that runs
  ansible-runner and ansible-playbook without starting an interpreter;
- the warm module interpreter (`module_server.py`): each task's module is a
  fork of it, reached through a shim named as the runs' Python interpreter.

Both die with the operator. The warm runner imports Ansible with the
environment every run gets (runner/environment.py), so that what Ansible
reads at import is what a run would have read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ansible_operator.runner.configuration import RunSpec
from ansible_operator.runner.environment import with_our_python
from ansible_operator.runner.launcher import StartedRun
from ansible_operator.runner.warm.acceleration import Verdict
from ansible_operator.runner.warm.accelerations.warm_module_interpreter import (
    NAME as MODULE_INTERPRETER,
)
from ansible_operator.runner.warm.hits import HITS_FILE, HitCounters
from ansible_operator.runner.warm.module_server import SHIM_FILE
from ansible_operator.runner.warm.zygote import ForkedProcess, WarmZygote

log = logging.getLogger("ansible_operator.runner")
START_TIMEOUT = 60.0
RUNNER_EXIT_WAIT = 1.0  # seconds the warm runner may take to exit after its last word


@dataclass
class WarmProcesses:
    # The shim runs name as their Python interpreter (None: the module
    # interpreter's probe failed, modules run under plain Python).
    interpreter: Path | None
    run_socket: Path  # where runs are asked of the warm runner
    # The warm runner (started, or forked from the operator: zygote.py); the
    # module interpreter is its child.
    process: asyncio.subprocess.Process | ForkedProcess
    accelerations: dict[str, Verdict]  # each acceleration's verdict, in report order
    hits_file: Path  # how often each was used (hits.py)

    def hits(self) -> dict[str, int]:
        try:
            return HitCounters.open(self.hits_file).read()
        except (OSError, ValueError):
            return {}

    async def start(self, spec: RunSpec) -> StartedRun:
        """Ask the warm runner (run_server.py) to fork the run `spec` describes."""
        reader, writer = await asyncio.open_unix_connection(str(self.run_socket), limit=1 << 20)
        request = {"argv": spec.command()[3:], "env": spec.env, "cwd": str(Path.cwd())}
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

    async def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()  # its module interpreter dies with it
        await self.process.wait()


async def start_warm_processes(
    scratch: Path,
    run_env: dict[str, str],
    targets: list[dict[str, str]] | None = None,
    switched_off: tuple[str, ...] = (),
    zygote: WarmZygote | None = None,
) -> WarmProcesses:
    """`run_env`: runner/environment.py's `ansible_environment(...)`; `targets`: the roles and
    playbooks runs will play (`{"role": path}`, `{"playbook": path}`);
    `switched_off`: accelerations not to use; `zygote`: the operator's fork
    to make the warm runner of (else it is started as a program). Raises
    RuntimeError if the warm runner does not start."""
    # Runs find ansible-playbook beside our interpreter, as process.execute's do.
    env = with_our_python({**os.environ, **run_env})
    module_socket, run_socket = scratch / "modules.sock", scratch / "runs.sock"
    runner_scratch = scratch / "warm-runner"
    runner_scratch.mkdir(mode=0o700, exist_ok=True)
    process: asyncio.subprocess.Process | ForkedProcess | None = None
    if zygote is not None and not zygote.used:
        request = {
            "env": env,
            "run_socket": str(run_socket),
            "module_socket": str(module_socket),
            "scratch": str(runner_scratch),
            "targets": targets or [],
            "switched_off": list(switched_off),
        }
        try:
            process = zygote.start(request)
            readline = process.readline
        except OSError as error:
            log.warning("the operator's fork for the warm runner is gone (%s): starting it", error)
    if process is None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-P",  # the operator's working directory is not an import path
            "-m",
            "ansible_operator.runner.warm.run_server",
            str(run_socket),
            str(module_socket),
            str(runner_scratch),
            json.dumps(targets or []),
            json.dumps(list(switched_off)),
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        assert process.stdout is not None
        readline = process.stdout.readline
    try:
        ready = await asyncio.wait_for(readline(), START_TIMEOUT)
    except TimeoutError:
        ready = b""
    except asyncio.CancelledError:  # the operator stops before the runner is ready
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    word, _, report = ready.decode(errors="replace").strip().partition(" ")
    try:
        verdicts = {
            name: Verdict(bool(found["on"]), str(found.get("why", "")))
            for name, found in json.loads(report).items()
        }
    except (ValueError, TypeError, KeyError, AttributeError):
        verdicts = {}
    if word != "ready" or not verdicts:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise RuntimeError(f"the warm runner did not start (exit code {process.returncode})")
    on = [name for name, verdict in verdicts.items() if verdict.on]
    log.info("warm runner ready pid=%s accelerations on: %s", process.pid, ", ".join(on) or "none")
    for name, verdict in verdicts.items():
        if not verdict.on:
            log.warning("warm runner acceleration %s off, stock behaviour: %s", name, verdict.why)
    module_interpreter = verdicts.get(MODULE_INTERPRETER, Verdict(False)).on
    interpreter = runner_scratch / SHIM_FILE if module_interpreter else None
    return WarmProcesses(interpreter, run_socket, process, verdicts, runner_scratch / HITS_FILE)
