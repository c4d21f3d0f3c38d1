"""The benchmarked operator in control groups of its own: a CPU quota as a Pod's
CPU limit sets one, and the exact CPU time of everything the operator ran.

A Pod's CPU limit is CFS bandwidth on its cgroup: `cpu.max` = "QUOTA PERIOD" on
cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` on v1, with the kubelet's
period of 100 ms (ours too). A quota holds for the group and every group under
it, so the run groups the operator makes under its own (runner/cgroups.py) stay
within it.

The groups (root only), each named `bench-reconcile-<bench pid>-<random>`:

- cgroup v2 (the unified hierarchy: /sys/fs/cgroup, or /sys/fs/cgroup/unified
  on a hybrid host), at its root: its `cpu.stat` `usage_usec` counts the CPU of
  every process that was ever in it or below (no controller needed). The quota
  goes in its `cpu.max` where the `cpu` controller is on v2 (enabled in the
  root's cgroup.subtree_control first if it is not).
- Where the `cpu` controller is bound to v1 instead (a hybrid host), the quota
  goes in a group of the `cpu` hierarchy, which the operator joins as well. On a
  v1-only host, the CPU time is the `cpuacct` group's.

The operator makes its `ansible-operator-<pid>/<run>` groups under its own group
of each hierarchy it may write to: the v2 one above, in place of the root. That
group enables no controller for its children (v2 forbids a group that holds
processes, the operator, to hand controllers down), which changes nothing the
operator relies on: it tracks and kills a run through its group's
`cgroup.procs` and `cgroup.kill`, and the v1 freezer, pids and memory groups
are not touched. (Only a `--run-memory-limit`, which the bench does not set,
could not go into a v2 `memory.max` under it.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

PERIOD_US = 100_000  # the kubelet's CFS period
PREFIX = "bench-reconcile-"


class Unavailable(Exception):
    """No cgroup can be made for the operator here: why not."""


def _mounts() -> list[tuple[str, Path, set[str]]]:
    """(fstype, mount point, super options) of each cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((tail[0], Path(fields[4]), set(tail[2].split(","))))
    return found


def _v2_root() -> Path | None:
    return next((mount for fstype, mount, _ in _mounts() if fstype == "cgroup2"), None)


def _v1_root(controller: str) -> Path | None:
    return next(
        (
            mount
            for fstype, mount, options in _mounts()
            if fstype == "cgroup" and controller in options
        ),
        None,
    )


def _v2_controllers(group: Path, name: str = "cgroup.controllers") -> set[str]:
    try:
        return set((group / name).read_text().split())
    except OSError:
        return set()


def _stat(path: Path, key: str) -> int:
    """A `key value` line's value in a cgroup stat file; the file's one number when key is ""."""
    text = path.read_text()
    if not key:
        return int(text.split()[0])
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    raise OSError(f"no {key} in {path}")


def unavailable_reason(limited: bool) -> str | None:
    """Why no group (with a CPU quota, if `limited`) can be made here; None if one can."""
    if os.geteuid() != 0:
        return "not root: cannot make cgroups"
    v2 = _v2_root()
    if limited and not (v2 and "cpu" in _v2_controllers(v2)) and _v1_root("cpu") is None:
        return "no cpu controller, in cgroup v2 or v1"
    if not limited and v2 is None and _v1_root("cpuacct") is None:
        return "no cgroup v2 hierarchy and no v1 cpuacct one"
    return None


@dataclass
class CpuGroup:
    """The groups the operator is started in, one per hierarchy used."""

    limit: float | None  # CPUs; None: no quota
    groups: list[Path] = field(default_factory=list)
    quota: str = "no quota"  # how the limit is set, for the report
    # (file, key, seconds per unit) of the CPU used, and of the time throttled.
    usage: tuple[Path, str, float] | None = None
    throttled: tuple[Path, str, float] | None = None

    @classmethod
    def make(cls, limit: float | None) -> CpuGroup:
        if reason := unavailable_reason(limit is not None):
            raise Unavailable(reason)
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
        group = cls(limit)
        try:
            group._make(name)
        except BaseException:
            group.remove()
            raise
        return group

    def _make(self, name: str) -> None:
        v2 = _v2_root()
        if v2 is not None:
            path = self._mkdir(v2 / name)
            self.usage = (path / "cpu.stat", "usage_usec", 1e-6)
            if self.limit is not None and "cpu" in _v2_controllers(v2):
                if "cpu" not in _v2_controllers(v2, "cgroup.subtree_control"):
                    (v2 / "cgroup.subtree_control").write_text("+cpu")
                    print(
                        f"enabled the cpu controller in {v2}/cgroup.subtree_control",
                        file=sys.stderr,
                    )
                quota = round(self.limit * PERIOD_US)
                (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
                self.quota = f"cgroup v2 cpu.max {quota} {PERIOD_US}"
                self.throttled = (path / "cpu.stat", "throttled_usec", 1e-6)
                return
        cpu = _v1_root("cpu")
        if self.limit is not None and cpu is not None:
            path = self._mkdir(cpu / name)
            quota = round(self.limit * PERIOD_US)
            (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota))
            self.quota = f"cgroup v1 cpu.cfs_quota_us {quota}, cpu.cfs_period_us {PERIOD_US}" + (
                "; the cpu controller is bound to v1 here, not v2" if v2 else ""
            )
            self.throttled = (path / "cpu.stat", "throttled_time", 1e-9)
            if self.usage is None and (path / "cpuacct.usage").exists():
                self.usage = (path / "cpuacct.usage", "", 1e-9)
        if self.usage is None and (cpuacct := _v1_root("cpuacct")) is not None:
            path = cpuacct / name
            if path not in self.groups:
                self._mkdir(path)
            self.usage = (path / "cpuacct.usage", "", 1e-9)
        if self.limit is not None and self.throttled is None:
            raise Unavailable("no cpu controller to set a quota in")

    def _mkdir(self, path: Path) -> Path:
        path.mkdir()
        self.groups.append(path)
        return path

    def join(self, pid: int) -> None:
        """Move `pid` (all its threads) into every group; what it forks from then on stays there."""
        for group in self.groups:
            (group / "cgroup.procs").write_text(str(pid))

    def cpu_seconds(self) -> float:
        """CPU of every process that was ever in the groups (or below), since they were made."""
        assert self.usage is not None
        path, key, unit = self.usage
        return _stat(path, key) * unit

    def throttled_seconds(self) -> float:
        """How long the quota held the group back (0 without a quota)."""
        if self.throttled is None:
            return 0.0
        path, key, unit = self.throttled
        with contextlib.suppress(OSError, ValueError):
            return _stat(path, key) * unit
        return float("nan")

    def throttling(self) -> str:
        """The quota's counters (periods, throttled periods, time), as the kernel gives them."""
        if self.throttled is None:
            return ""
        with contextlib.suppress(OSError):
            return " ".join(self.throttled[0].read_text().split())
        return ""

    def pids(self) -> set[int]:
        """Every process in the groups and the groups under them (the operator's run groups)."""
        found: set[int] = set()
        for group in self.groups:
            for folder, _, _ in os.walk(group):
                with contextlib.suppress(OSError, ValueError):
                    found.update(int(p) for p in Path(folder, "cgroup.procs").read_text().split())
        return found

    def remove(self, timeout: float = 10.0) -> None:
        """Kill what is left in the groups (only the operator's processes are
        there), then remove them, the groups under them first."""
        for group in self.groups:
            if (group / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (group / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for group in self.groups:
            folders = [Path(folder) for folder, _, _ in os.walk(group)]
            for folder in reversed(folders):  # os.walk lists a folder before its subfolders
                while True:
                    try:
                        folder.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError as error:
                        if time.monotonic() > deadline:
                            print(f"could not remove the cgroup {folder}: {error}", file=sys.stderr)
                            break
                        time.sleep(0.1)
        self.groups.clear()
