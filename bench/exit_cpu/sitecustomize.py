"""bench/profile.py's per-process CPU: on PYTHONPATH, with
ANSIBLE_OPERATOR_BENCH_EXIT_CPU naming a file, every Python process (and every
fork of one) appends one line when it ends: its pid, its own CPU time
(`time.process_time`, exact, this process only), when it ended, the functions
on its stack when it called `os._exit` (forks end that way: the warm runner's
runs, Ansible's task workers, the module interpreter's modules) and its
argv[0] (exec'd processes end through atexit). py-spy's samples miss most of
these processes: a task's worker and module live ~50 ms.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import time

_FILE = os.environ.get("ANSIBLE_OPERATOR_BENCH_EXIT_CPU")


def _record(stack: list[str]) -> None:
    main = sys.modules.get("__main__")
    line = {
        "pid": os.getpid(),
        "cpu_ms": time.process_time() * 1000,
        "ended": time.time(),
        "stack": stack,
        "argv0": sys.argv[0] if sys.argv else "",
        "ansiballz": hasattr(main, "_ansiballz_main"),
    }
    # One write of one line: appends from many processes do not interleave.
    fd = os.open(_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # type: ignore[arg-type]
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _stack_names(depth: int) -> list[str]:
    names = []
    frame = sys._getframe(depth)
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


if _FILE:
    _os_exit = os._exit

    def _exit_recorded(code: int) -> None:
        # A measurement never changes how a process ends.
        with contextlib.suppress(Exception):
            _record(_stack_names(2))
        _os_exit(code)

    os._exit = _exit_recorded
    atexit.register(lambda: _record(["<atexit>"]))
