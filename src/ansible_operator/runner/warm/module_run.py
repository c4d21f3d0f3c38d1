"""One module run in the warm module interpreter: its request read, the
process set up as the shim's (stdio, environment, working directory), the
module's program run as `python AnsiballZ_x.py` would run it.

Shared by the two ways a run's session serves a module: a fork per module
(module_server.py) and a process that serves its run's modules one after
another (module_worker.py).
"""

from __future__ import annotations

import array
import contextlib
import importlib.abc
import importlib.machinery
import marshal
import os
import runpy
import signal
import socket
import sys
import tempfile
import warnings
import zipfile
import zipimport

from ansible_operator.runner.cgroups import CGROUP_ENV

MAX_HEADER = 1 << 20


class PayloadFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: an `ansible.*` module the preloaded installation
    does not have is looked up in the module's payload (a zip on sys.path)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("ansible."):
            return None
        # A zipimporter finds the last name part under its own prefix.
        package = fullname.rpartition(".")[0].replace(".", "/")
        for entry in sys.path:
            if entry.endswith(".zip"):
                with contextlib.suppress(OSError, zipimport.ZipImportError):
                    spec = zipimport.zipimporter(f"{entry}/{package}").find_spec(fullname)
                    if spec is None:
                        spec = _namespace_in_zip(entry, fullname)
                    if spec is not None:
                        return spec
        return None


def _namespace_in_zip(archive: str, fullname: str) -> importlib.machinery.ModuleSpec | None:
    """A package directory without __init__.py (and without a directory entry
    of its own in the zip): a namespace package."""
    prefix = fullname.replace(".", "/") + "/"
    with zipfile.ZipFile(archive) as payload:
        if not any(name.startswith(prefix) for name in payload.namelist()):
            return None
    spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
    spec.submodule_search_locations = [f"{archive}/{prefix.rstrip('/')}"]
    return spec


def receive_request(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    """The shim's request: `LENGTH\\n` then a marshalled dict, and its stdio."""
    fds = array.array("i")
    data, ancillary, _flags, _address = conn.recvmsg(1, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    buffer = bytearray(data)
    while b"\n" not in buffer:
        chunk = conn.recv(64)
        if not chunk or len(buffer) > 32:
            raise ConnectionError("incomplete request")
        buffer += chunk
    length, _, body = bytes(buffer).partition(b"\n")
    size = int(length)
    if size > MAX_HEADER:
        raise ConnectionError("request too large")
    received = bytearray(body)
    while len(received) < size:
        chunk = conn.recv(size - len(received))
        if not chunk:
            raise ConnectionError("incomplete request")
        received += chunk
    request = marshal.loads(bytes(received))
    if not isinstance(request, dict):
        raise ConnectionError("malformed request")
    return request, list(fds)


def run_groups(request: dict[str, object]) -> str:
    """The cgroups of the run a request is from (runner/cgroups.py's CGROUP_ENV)."""
    environment = request.get("env")
    return str(environment.get(CGROUP_ENV, "")) if isinstance(environment, dict) else ""


def ignore_our_threads_in_forks() -> None:
    """The thread watching a module's caller is ours: a module that forks
    (async_wrapper) is not to be told that its process has threads, which
    under Python it has not."""
    warnings.filterwarnings(
        "ignore", r"This process \(pid=\d+\) is multi-threaded", DeprecationWarning
    )


def enter(request: dict[str, object], fds: list[int]) -> None:
    """This process as the shim was: its stdio, environment and working directory."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    # Python's own stdio objects over the new descriptors.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(request["env"])  # type: ignore[arg-type]
    tempfile.tempdir = None  # follow this run's TMPDIR, not the server's
    os.chdir(str(request["cwd"]))
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def run_program(request: dict[str, object]) -> int:
    """The module's program, as `python ARGV` runs it (or `python` with the
    program on stdin, as Ansible pipelines a module): its exit code."""
    argv = [str(arg) for arg in request["argv"]]  # type: ignore[attr-defined]
    try:
        if argv and not argv[0].startswith("-"):
            sys.argv = argv
            runpy.run_path(argv[0], run_name="__main__")
        else:  # pipelining: the module arrives on stdin
            sys.argv = [""]
            source = sys.stdin.read()
            exec(compile(source, "<stdin>", "exec"), {"__name__": "__main__"})
        return 0
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
