"""Ansible's task workers do not copy what their garbage collector would walk
(acceleration `worker-gc-freeze`).

Ansible forks a worker per task (those of batches of several hosts, once
task-inline runs the others in the playbook's process): like the warm
runner's forks, each freezes what it inherited before it starts, so its
collector does not write to (and so copy) the shared pages.
"""

from __future__ import annotations

import gc
from typing import Any

from ansible_operator.runner.warm.acceleration import Acceleration, Install, Phase, require, used

NAME = "worker-gc-freeze"


def probe() -> None:
    import multiprocessing

    from ansible.executor.process.worker import WorkerProcess

    require(
        issubclass(WorkerProcess, multiprocessing.process.BaseProcess)
        and callable(getattr(WorkerProcess, "start", None)),
        "ansible.executor.process.worker.WorkerProcess is no longer a process with start()",
    )


def install() -> None:
    from ansible.executor.process.worker import WorkerProcess

    start = WorkerProcess.start

    def frozen_start(self: Any) -> None:
        gc.freeze()
        used(NAME)
        start(self)

    WorkerProcess.start = frozen_start  # type: ignore[method-assign]


ACCELERATION = Acceleration(
    name=NAME,
    saves="memory: task workers do not copy what their garbage collector would walk",
    relies_on="ansible.executor.process.worker.WorkerProcess.start",
    probe=probe,
    installs=(Install(Phase.PLAYBOOK, lambda _context: install()),),
)
