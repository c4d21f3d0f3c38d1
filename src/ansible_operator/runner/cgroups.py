"""A control group per run (Linux), where the operator may make them.

A process started by a run stays in the run's group whatever it does
(`setsid`, double forks, re-parenting to init), so the group finds and kills
all of them, and caps their memory together. The operator makes its groups
under its own group of each hierarchy:

    <mount>/<the operator's group>/ansible-operator-<operator pid>/<run>/

- cgroup v2 (any mount with `cgroup.kill`): tracking, and kill in one write;
  `memory.max` when the memory controller is delegated there;
- cgroup v1: `freezer` (freeze, kill, thaw: nothing forks meanwhile), `pids`
  (tracking), `memory` (`memory.limit_in_bytes`).

Where none is writable (a container without cgroup delegation) there are no
groups: runs are then tracked by process tree and environment (containment.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("ansible_operator.runner")

CGROUP_ENV = "ANSIBLE_OPERATOR_RUN_CGROUPS"  # the run's groups, for processes that join
BASE_PREFIX = "ansible-operator-"
V1_CONTROLLERS = ("freezer", "pids", "memory")
FREEZE_WAIT = 2.0  # seconds a freeze may take before we kill anyway


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    controller: str  # v1: the controller; v2: ""
    group: Path  # the operator's own group in it


def _mounts() -> list[tuple[str, Path, str, set[str]]]:
    """(fstype, mount point, root within the hierarchy, super options)."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                options = set(tail[2].split(","))
                found.append((tail[0], Path(fields[4]), fields[3], options))
    return found


def _own_groups() -> dict[str, str]:
    """/proc/self/cgroup: v1 controller (or "" for v2) -> our path in it."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _number, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                groups[controller] = path
    return groups


def hierarchies() -> list[Hierarchy]:
    """The hierarchies runs can be grouped in: the operator's groups where it
    may make subgroups."""
    own = _own_groups()
    found: list[Hierarchy] = []
    for fstype, mount, root, options in _mounts():
        if fstype == "cgroup2":
            version, controller = 2, ""
        else:
            names = [name for name in V1_CONTROLLERS if name in options]
            if not names:
                continue
            version, controller = 1, names[0]
        if controller not in own or any(h.controller == controller for h in found):
            continue
        relative = os.path.relpath(own[controller], root) if root != "/" else own[controller]
        group = mount / relative.lstrip("/") if relative != "." else mount
        if version == 2 and not (group / "cgroup.procs").exists():
            continue
        if os.access(group, os.W_OK):
            found.append(Hierarchy(version, controller, group))
    return found


@dataclass
class RunCgroup:
    """One run's groups (one per hierarchy)."""

    groups: list[Path]
    memory_limit: int | None = None
    _memory_group: Path | None = field(default=None, repr=False)

    @property
    def env_value(self) -> str:
        return os.pathsep.join(str(group) for group in self.groups)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for group in self.groups:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(pid) for pid in (group / "cgroup.procs").read_text().split())
        return found

    def kill(self) -> None:
        """SIGKILL every process in the run's groups, those it forks meanwhile included."""
        if not self.pids():
            # Nothing left to fork into them (processes enter a run's group
            # only by forking there or by joining at the run's start): no
            # freeze, no wait.
            return
        for group in self.groups:
            if (group / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (group / "cgroup.kill").write_text("1")
        freezer = next((g for g in self.groups if (g / "freezer.state").exists()), None)
        if freezer is not None:
            with contextlib.suppress(OSError):
                (freezer / "freezer.state").write_text("FROZEN")
                deadline = time.monotonic() + FREEZE_WAIT
                while (freezer / "freezer.state").read_text().strip() == "FREEZING":
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
        for _ in range(50):
            members = self.pids()
            if not members:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if freezer is not None:
                with contextlib.suppress(OSError):
                    (freezer / "freezer.state").write_text("THAWED")  # the killed may die
            time.sleep(0.01)

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the run for its memory limit."""
        group = self._memory_group
        if group is None:
            return False
        for name in ("memory.oom_control", "memory.events"):
            with contextlib.suppress(OSError, ValueError):
                for line in (group / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
        return False

    def remove(self) -> None:
        self.kill()
        for group in self.groups:
            with contextlib.suppress(OSError):
                group.rmdir()


class RunGroups:
    """Makes the runs' groups under this operator's base groups."""

    def __init__(self, found: list[Hierarchy] | None = None) -> None:
        self._bases: list[Path] = []
        for hierarchy in hierarchies() if found is None else found:
            base = hierarchy.group / f"{BASE_PREFIX}{os.getpid()}"
            try:
                base.mkdir(exist_ok=True)
            except OSError:
                continue
            self._bases.append(base)
        if self._bases:
            log.info("runs are contained in cgroups %s", " ".join(map(str, self._bases)))

    def __bool__(self) -> bool:
        return bool(self._bases)

    def create(self, name: str, memory_limit: int | None = None) -> RunCgroup | None:
        groups: list[Path] = []
        memory_group: Path | None = None
        for base in self._bases:
            group = base / name
            try:
                group.mkdir()
            except OSError as error:
                log.warning("could not make the run's cgroup %s: %s", group, error)
                continue
            groups.append(group)
            if memory_limit and _set_memory_limit(group, memory_limit):
                memory_group = group
        if not groups:
            return None
        return RunCgroup(groups, memory_limit if memory_group else None, memory_group)

    def close(self) -> None:
        for base in self._bases:
            remove_tree(base)
        self._bases.clear()


def _set_memory_limit(group: Path, limit: int) -> bool:
    for name in ("memory.limit_in_bytes", "memory.max"):
        if (group / name).exists():
            try:
                (group / name).write_text(str(limit))
            except OSError as error:
                log.warning("could not cap the run's memory in %s: %s", group, error)
                return False
            return True
    return False


def remove_tree(base: Path) -> None:
    """Kill everything in `base`'s groups and remove them."""
    for child in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        RunCgroup([child]).remove()
    with contextlib.suppress(OSError):
        base.rmdir()


def remove_stale() -> None:
    """Groups left by an operator that was killed (SIGKILL, OOM): their runs'
    processes outlived it; end them now."""
    for hierarchy in hierarchies():
        with contextlib.suppress(OSError):
            for base in hierarchy.group.glob(f"{BASE_PREFIX}*"):
                owner = base.name.removeprefix(BASE_PREFIX)
                if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                    log.info("removing the cgroups of a stopped operator %s", base)
                    remove_tree(base)


def join(groups: str) -> None:
    """In a process of a run (a warm fork): move it into the run's groups,
    named in the run's environment (CGROUP_ENV)."""
    for group in filter(None, groups.split(os.pathsep)):
        path = Path(group)
        if not path.name or not path.parent.name.startswith(BASE_PREFIX):
            continue  # only the groups the operator makes
        with contextlib.suppress(OSError):
            descriptor = os.open(path / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(descriptor, str(os.getpid()).encode())
            finally:
                os.close(descriptor)
