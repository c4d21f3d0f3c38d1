"""Helpers for tests that start warm processes and play runs in them, as the
runner host does, without a cluster: no proxy, no kubeconfig."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_operator.runner.environment import ansible_environment
from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.plan import new_ident
from ansible_operator.runner.process import RunSpec, execute
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.rundir import RunDir, prepare
from ansible_operator.runner.warm.processes import WarmProcesses, start_warm_processes
from ansible_operator.runner.warm.zygote import WarmZygote


def run_environment() -> dict[str, str]:
    return ansible_environment(roles_path=None, collections_path=None, pipelining=True)


async def start_warm(
    scratch: Path,
    target: dict[str, str],
    switched_off: tuple[str, ...] = (),
    zygote: WarmZygote | None = None,
) -> WarmProcesses:
    """Warm processes for one role or playbook (`{"role": path}`, `{"playbook": path}`)."""
    return await start_warm_processes(
        _private_dir(scratch), run_environment(), [target], switched_off, zygote=zygote
    )


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True)
    return path


async def play_warm(
    receiver: EventReceiver,
    warm: WarmProcesses,
    run_root: Path,
    *,
    role: Path | None = None,
    playbook: Path | None = None,
    extravars: dict[str, Any] | None = None,
    verbosity: int = 0,
    run_timeout: float = 120,
    on_event: Callable[[Any], None] | None = None,
) -> tuple[RunResult, RunDir]:
    """One run of `role` or `playbook` forked from `warm`, its events heard by
    `on_event` as well as by the run's summary."""
    summary = RunSummary()

    def hear(event: Any) -> None:
        summary.add(event)
        if on_event is not None:
            on_event(event)

    channel = receiver.open_channel(hear)
    run_dir = prepare(
        run_root,
        extravars=extravars or {},
        envvars={},
        kubeconfig=None,
        interpreter=warm.interpreter,
    )
    env = {SOCKET_ENV: str(receiver.socket_path), TOKEN_ENV: channel.token, **run_environment()}
    spec = RunSpec(
        run_dir=run_dir,
        role=role,
        playbook=playbook,
        ident=new_ident(),
        verbosity=verbosity,
        timeout=run_timeout,
        env=env,
    )
    try:
        result = await execute(spec, summary, launcher=warm)
    finally:
        receiver.close_channel(channel)
    return result, run_dir
