"""pexpect closes a run's terminal without its sleep (acceleration
`pty-close-without-delay`).

ansible-runner closes the terminal once it read its end, and pexpect then
sleeps 0.1 s "to give the kernel time" before it looks whether the process
ended: a run's fork waits for its ansible-playbook to end instead, and
closes without the sleep.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    parameters_of,
    require,
    used,
)

NAME = "pty-close-without-delay"


def probe() -> None:
    """A terminal pexpect spawns, its command ended: the child keeps its
    PtyProcess (`ptyproc`), whose `wait` gives the exit status and whose
    close sleeps `delayafterclose` (what `install` sets to 0)."""
    import pexpect
    import ptyprocess.ptyprocess as ptyprocess_module

    require("force" in parameters_of(pexpect.spawn.close), "pexpect.spawn.close takes no force")
    delay = 0.0625
    slept: list[float] = []
    real_time = ptyprocess_module.time
    child = pexpect.spawn("/bin/sh", ["-c", "exit 0"])
    try:
        pty = getattr(child, "ptyproc", None)
        require(isinstance(pty, ptyprocess_module.PtyProcess), "pexpect.spawn keeps no ptyproc")
        require(pty.wait() == 0, "ptyprocess.PtyProcess.wait gives no exit status")
        pty.delayafterclose = delay
        ptyprocess_module.time = _Clock(real_time, slept.append)  # type: ignore[attr-defined]
        try:
            child.close(force=True)
        finally:
            ptyprocess_module.time = real_time  # type: ignore[attr-defined]
    finally:
        with contextlib.suppress(Exception):
            child.close(force=True)
    require(delay in slept, "ptyprocess no longer sleeps delayafterclose as it closes")


class _Clock:
    """The `time` module, whose sleep is only noted."""

    def __init__(self, real: Any, sleep: Callable[[float], object]) -> None:
        self._real = real
        self.sleep = sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def install() -> None:
    """Each terminal pexpect spawns from now on closes without the sleep."""
    import pexpect

    spawn_before = pexpect.spawn

    def spawn(*args: Any, **kwargs: Any) -> Any:
        child = spawn_before(*args, **kwargs)
        close = child.close

        def close_when_ended(force: bool = True) -> None:
            with contextlib.suppress(Exception):
                child.ptyproc.wait()
            child.ptyproc.delayafterclose = 0.0
            used(NAME)
            close(force)

        child.close = close_when_ended
        return child

    pexpect.spawn = spawn  # type: ignore[misc]


ACCELERATION = Acceleration(
    name=NAME,
    saves="0.1 s per run: pexpect's sleep after closing the terminal",
    relies_on="pexpect.spawn.ptyproc, ptyprocess.PtyProcess.delayafterclose",
    probe=probe,
    installs=(Install(Phase.RUN, lambda _context: install()),),
)
