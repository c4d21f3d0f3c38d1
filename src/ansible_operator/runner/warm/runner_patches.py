"""Small accelerations of a warm run's ansible-runner and ansible-playbook
forks, each a probe and an installer (see acceleration.py); playbook-in-fork
is playbook_fork.py.

- pty-close-without-delay: pexpect's 0.1 s sleep after closing the terminal;
- event-files-whole: ansible-runner's event files written in one call;
- worker-gc-freeze: Ansible's per-task worker forks do not copy what their
  garbage collector would walk.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import types
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    parameters_of,
    require,
    used,
)

PTY_CLOSE = "pty-close-without-delay"
EVENT_FILES = "event-files-whole"
WORKER_GC = "worker-gc-freeze"


# ----- pty-close-without-delay --------------------------------------------------
def probe_pty_close() -> None:
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


def install_pty_close() -> None:
    """ansible-runner closes the terminal once it read its end, and pexpect
    then sleeps 0.1 s "to give the kernel time" before it looks whether the
    process ended: wait for that instead."""
    import pexpect

    spawn_before = pexpect.spawn

    def spawn(*args: Any, **kwargs: Any) -> Any:
        child = spawn_before(*args, **kwargs)
        close = child.close

        def close_when_ended(force: bool = True) -> None:
            with contextlib.suppress(Exception):
                child.ptyproc.wait()
            child.ptyproc.delayafterclose = 0.0
            used(PTY_CLOSE)
            close(force)

        child.close = close_when_ended
        return child

    pexpect.spawn = spawn  # type: ignore[misc]


# ----- event-files-whole ----------------------------------------------------------
def probe_event_files() -> None:
    import ansible_runner.runner as runner_module

    require(
        getattr(runner_module, "json", None) is json,
        "ansible_runner.runner does not use the json module by that name",
    )
    require(
        "json.dump(" in inspect.getsource(runner_module),
        "ansible_runner.runner no longer writes events with json.dump",
    )


def install_event_files() -> None:
    """ansible-runner writes each event file with json.dump through a codecs
    writer: one encoder call per JSON fragment. The same text, written once."""
    import ansible_runner.runner as runner_module

    def dump(obj: Any, fp: Any, *args: Any, **kwargs: Any) -> None:
        used(EVENT_FILES)
        fp.write(json.dumps(obj, *args, **kwargs))

    whole = types.ModuleType("json")
    whole.__dict__.update(json.__dict__)
    whole.dump = dump  # type: ignore[attr-defined]
    runner_module.json = whole  # type: ignore[attr-defined]


# ----- worker-gc-freeze -------------------------------------------------------------
def probe_worker_gc() -> None:
    import multiprocessing

    from ansible.executor.process.worker import WorkerProcess

    require(
        issubclass(WorkerProcess, multiprocessing.process.BaseProcess)
        and callable(getattr(WorkerProcess, "start", None)),
        "ansible.executor.process.worker.WorkerProcess is no longer a process with start()",
    )


def install_worker_gc() -> None:
    """Ansible forks a worker per task: like the warm runner's forks, they
    should not copy what their garbage collector would walk."""
    from ansible.executor.process.worker import WorkerProcess

    start = WorkerProcess.start

    def frozen_start(self: Any) -> None:
        gc.freeze()
        used(WORKER_GC)
        start(self)

    WorkerProcess.start = frozen_start  # type: ignore[method-assign]


PTY_CLOSE_ACCELERATION = Acceleration(
    name=PTY_CLOSE,
    saves="0.1 s per run: pexpect's sleep after closing the terminal",
    relies_on="pexpect.spawn.ptyproc, ptyprocess.PtyProcess.delayafterclose",
    probe=probe_pty_close,
    installs=(Install(Phase.RUN, lambda _context: install_pty_close()),),
)
EVENT_FILES_ACCELERATION = Acceleration(
    name=EVENT_FILES,
    saves="one write instead of one per JSON fragment for each event file",
    relies_on="ansible_runner.runner.json (json.dump)",
    probe=probe_event_files,
    installs=(Install(Phase.RUN, lambda _context: install_event_files()),),
)
WORKER_GC_ACCELERATION = Acceleration(
    name=WORKER_GC,
    saves="memory: task workers do not copy what their garbage collector would walk",
    relies_on="ansible.executor.process.worker.WorkerProcess.start",
    probe=probe_worker_gc,
    installs=(Install(Phase.PLAYBOOK, lambda _context: install_worker_gc()),),
)
