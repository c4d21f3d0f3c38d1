"""pexpect closes a run's terminal without its sleep (acceleration
`pty-close-without-delay`).

ansible-runner closes the terminal once it read its end, and pexpect then
sleeps 0.1 s "to give the kernel time" before it looks whether the process
ended: a run's fork waits for its ansible-playbook to end instead, and
closes without the sleep.
"""

from __future__ import annotations

import contextlib
import inspect
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
    import pexpect.pty_spawn
    from ptyprocess import PtyProcess

    require(
        "self.delayafterclose" in inspect.getsource(PtyProcess)
        and callable(getattr(PtyProcess, "wait", None)),
        "ptyprocess.PtyProcess has no delayafterclose or wait",
    )
    require(
        "self.ptyproc" in inspect.getsource(pexpect.pty_spawn.spawn),
        "pexpect.spawn keeps no ptyproc",
    )
    require("force" in parameters_of(pexpect.spawn.close), "pexpect.spawn.close takes no force")


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
