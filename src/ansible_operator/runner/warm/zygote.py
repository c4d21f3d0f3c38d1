"""The warm runner as a fork of the operator, made before the operator starts.

Started as a program of its own, the warm runner imports again much of what
the operator already holds (the Python runtime, the `kubernetes` client its
module interpreter preloads, YAML, SSL): a second copy every replica pays for
at rest (bench/reconcile.py's idle PSS: 153 MiB started, 139 forked), and
~0.7 s more before the first run. Forked from the operator once the operator has
imported its own code and before it starts a thread (a fork of a threaded
process may inherit a lock another thread held), the warm runner shares those
pages with the operator, copy-on-write.

The fork waits until the operator knows what to start (its scratch directory,
the runs' environment, the targets), importing meanwhile what the warm runner
needs and the operator may not have imported (EARLY_IMPORTS); it then becomes the
warm runner exactly as `python -m ...run_server` would have (processes.py).
An operator that never asks (reference mode, a start that failed) closes the
request pipe, and the fork exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import io
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from ansible_operator.runner.lifetime import die_with_parent
from ansible_operator.runner.warm.forkserver import MAX_REQUEST

# What the warm runner imports whatever its request says and the operator
# may not have imported (its module interpreter's Kubernetes client and
# `kubernetes.dynamic`, Ansible's jinja2): the fork imports them while it waits
# for the request, beside the operator's start rather than after it (issue 45);
# what the operator imported already costs nothing here.
EARLY_IMPORTS = ("kubernetes.client", "kubernetes.config", "kubernetes.dynamic", "jinja2")


class ForkedProcess:
    """The warm runner forked from here: what processes.py needs of an
    `asyncio.subprocess.Process` (the pid, its ready line, kill and wait)."""

    def __init__(self, pid: int, ready_fd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ready_fd = ready_fd
        self._exited: asyncio.Future[int] | None = None  # shared by every waiter

    async def readline(self) -> bytes:
        """The warm runner's `ready ...` line (b"" if it exited first)."""
        return await asyncio.to_thread(_read_line, self._ready_fd)

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    async def wait(self) -> int:
        """Its exit code, once it exited. Any number of callers may wait (the
        runner host's watch and its stop): the pid is reaped once."""
        if self._exited is None:
            self._exited = asyncio.ensure_future(self._reap())
        return await asyncio.shield(self._exited)

    async def _reap(self) -> int:
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # not Linux >= 5.3: a thread waits instead
            pidfd = None
        if pidfd is not None:
            # Readable once the process exited: no thread held while it runs.
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[int] = loop.create_future()
            loop.add_reader(pidfd, _collect_exit, self.pid, exited)
            try:
                status = await exited
            finally:
                loop.remove_reader(pidfd)
                os.close(pidfd)
        else:
            _, status = await asyncio.to_thread(os.waitpid, self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):
            os.close(self._ready_fd)
        return self.returncode


class WarmZygote:
    """A fork of the operator waiting to become its warm runner."""

    def __init__(self, pid: int, request_fd: int, ready_fd: int) -> None:
        self.pid = pid
        self._request_fd: int | None = request_fd
        self._ready_fd = ready_fd
        self._reaped = False

    @classmethod
    def fork(cls) -> WarmZygote | None:
        """None where a fork would not be safe (a thread is running) or possible."""
        if threading.active_count() > 1 or not hasattr(os, "fork"):
            return None
        request_read, request_write = os.pipe()
        ready_read, ready_write = os.pipe()
        # What is imported by now stays shared: the operator's collector must
        # not walk (and so write to, copying) these objects from now on.
        gc.collect()
        gc.freeze()
        sys.stdout.flush()  # nothing of the operator's may reach the ready pipe
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(request_write)
            os.close(ready_read)
            _become_warm_runner(request_read, ready_write)
        os.close(request_read)
        os.close(ready_write)
        return cls(pid, request_write, ready_read)

    @property
    def used(self) -> bool:
        return self._request_fd is None

    def start(self, request: dict[str, Any]) -> ForkedProcess:
        """Make the fork the warm runner (`request`: `_become_warm_runner`'s).
        Raises OSError if it is gone, RuntimeError if it was started already."""
        if self._request_fd is None:
            raise RuntimeError("the warm runner's fork was started already")
        fd, self._request_fd = self._request_fd, None
        with os.fdopen(fd, "wb") as pipe:  # closed, and so the request ended, either way
            pipe.write(json.dumps(request).encode() + b"\n")
        self._reaped = True  # the ForkedProcess waits for it from now on
        return ForkedProcess(self.pid, self._ready_fd)

    def discard(self) -> None:
        """Not asked to start: the fork sees the pipe close and exits."""
        if self._request_fd is not None:
            os.close(self._request_fd)
            self._request_fd = None
            with contextlib.suppress(OSError):
                os.close(self._ready_fd)
        if not self._reaped:
            self._reaped = True
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


def _collect_exit(pid: int, exited: asyncio.Future[int]) -> None:
    """Its pidfd is readable: the process exited, waitpid returns at once."""
    if not exited.done():
        _, status = os.waitpid(pid, os.WNOHANG)
        exited.set_result(status)


def _read_line(fd: int) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    return bytes(line)


def _read_request(fd: int) -> dict[str, Any] | None:
    data = bytearray()
    while len(data) <= MAX_REQUEST:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        if data.endswith(b"\n"):
            break
    os.close(fd)
    if not data.strip():
        return None
    request = json.loads(data)
    return request if isinstance(request, dict) else None


def _forget_logging() -> None:
    """Logging as a started program has it: none configured. The operator's
    handler and levels would otherwise reach the runs and their modules (at
    debug with --zap-devel: the kubernetes client's requests on a module's stderr)."""
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    for logger in loggers:
        logger.handlers.clear()
        logger.setLevel(logging.NOTSET)
    logging.root.handlers.clear()
    logging.root.setLevel(logging.WARNING)


def _become_warm_runner(request_fd: int, ready_fd: int) -> NoReturn:
    code = 1
    try:
        die_with_parent()
        for signum in (signal.SIGINT, signal.SIGTERM):  # the operator's are not ours
            signal.signal(signum, signal.SIG_DFL)
        # As `python -P`: the operator's working directory is not an import path.
        sys.path[:] = [entry for entry in sys.path if entry not in ("", str(Path.cwd()))]
        for name in EARLY_IMPORTS:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        request = _read_request(request_fd)
        if request is None:
            os._exit(0)
        os.dup2(ready_fd, 1)  # the ready line, as the started program's stdout
        os.close(ready_fd)
        # A stdout made for the pipe, as a started program's: the operator's
        # was made for what its fd 1 was (a file cannot be told where a pipe is).
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False),
            encoding=sys.stdout.encoding,
            errors=sys.stdout.errors,
            line_buffering=True,
        )
        os.environ.clear()
        os.environ.update(request["env"])
        _forget_logging()
        from ansible_operator.runner.warm import run_server

        run_server.serve(
            Path(request["run_socket"]),
            Path(request["module_socket"]),
            Path(request["scratch"]),
            request["targets"],
            request["switched_off"],
        )
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)
