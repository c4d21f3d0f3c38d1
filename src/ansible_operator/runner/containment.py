"""Every process of one run, found and killed: at the run's end, at its
timeout and at the operator's shutdown.

A role can start what outlives its run (`setsid nohup sleep 1000 &`): a new
session, re-parented to init, out of the run's process group and tree. So a
run's processes are found three ways, and all of them are killed:

- its cgroup (cgroups.py), where the operator may make one: nothing escapes;
- its process tree, read from /proc before anything dies;
- its mark: every process of a run inherits `RUN_MARK_ENV=<run id>` in its
  environment, which /proc/PID/environ shows for whatever a run executes,
  whichever session or parent it ends up with (a process that clears its own
  environment escapes this one; not the cgroup).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ansible_operator.runner import proctree
from ansible_operator.runner.cgroups import CGROUP_ENV, RunCgroup, RunGroups

RUN_MARK_ENV = "ANSIBLE_OPERATOR_RUN_ID"
SWEEP_ROUNDS = 20  # a process may fork while we look: look again until none is left


def marked(run_id: str) -> list[int]:
    """Processes whose environment marks them as the run's."""
    mark = f"{RUN_MARK_ENV}={run_id}".encode()
    own = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        with contextlib.suppress(OSError):
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


@dataclass
class Containment:
    """One run's processes."""

    run_id: str
    cgroup: RunCgroup | None = None

    @classmethod
    def create(
        cls, run_id: str, groups: RunGroups | None, memory_limit: int | None = None
    ) -> Containment:
        cgroup = groups.create(run_id, memory_limit) if groups else None
        return cls(run_id, cgroup)

    def env(self) -> dict[str, str]:
        """What the run's environment carries so its processes can be found."""
        env = {RUN_MARK_ENV: self.run_id}
        if self.cgroup is not None:
            env[CGROUP_ENV] = self.cgroup.env_value
        return env

    def members(self, leader: int | None) -> list[int]:
        found = set(self.cgroup.pids()) if self.cgroup is not None else set()
        if leader is not None and proctree.stat_fields(leader) is not None:
            found.update(proctree.tree(leader))
        found.update(marked(self.run_id))
        found.discard(os.getpid())
        return sorted(found)

    def signal(self, leader: int | None, signum: signal.Signals) -> None:
        proctree.signal_all(self.members(leader), signum)

    def kill(self, leader: int | None) -> None:
        """SIGKILL all of them, until none is left (blocking: run it in a thread)."""
        if self.cgroup is not None:
            self.cgroup.kill()
        for _ in range(SWEEP_ROUNDS):
            members = [pid for pid in self.members(leader) if not _zombie(pid)]
            if not members:
                return
            proctree.signal_all(members, signal.SIGKILL)
            time.sleep(0.01)

    def out_of_memory(self) -> bool:
        return self.cgroup is not None and self.cgroup.out_of_memory()

    def close(self) -> None:
        """After kill(): the run's groups go."""
        if self.cgroup is not None:
            self.cgroup.remove()


def _zombie(pid: int) -> bool:
    fields = proctree.stat_fields(pid)
    return fields is None or fields[0] == "Z"
