"""A process and everything it started, from /proc (Linux).

A run is more than one process group: ansible-runner starts ansible-playbook
in a pseudo-terminal of its own session, and modules start commands. Killing
a run means killing all of them, so the tree is read before anything dies
(a dead parent's children are re-parented and lost to the walk)."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ..."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def tree(root: int) -> list[int]:
    """`root` and all its descendants, parents before children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat_fields(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def signal_all(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
