"""A warm interpreter for Ansible modules (the process; its acceleration record
and probe: accelerations/warm_module_interpreter.py).

Every task of a role runs its module in a fresh Python process that imports
ansible's module_utils and the Kubernetes client again: ~0.4 s of CPU per
kubernetes.core task before it does anything. In `warm` runner mode the runs'
inventory names a tiny interpreter shim (see `write_shim`) instead of Python;
the shim hands its argv, environment, working directory and its stdin, stdout
and stderr (as file descriptors) to this server over a unix socket. The server
has imported all of that once, forks, and the child runs the module exactly as
`python AnsiballZ_x.py` would, in the shim's environment, writing to the
shim's own stdout/stderr. Ansible sees an ordinary interpreter.

The module code, its arguments and its output are untouched: only the
imports are shared (copy-on-write), so results are the same as in
`reference` mode.
"""

from __future__ import annotations

import array
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import marshal
import os
import runpy
import signal
import socket
import sys
import tempfile
import threading
import warnings
import zipfile
import zipimport
from pathlib import Path
from typing import NoReturn

from ansible_operator.runner import cgroups, priority
from ansible_operator.runner.lifetime import die_with_parent
from ansible_operator.runner.warm import acceleration
from ansible_operator.runner.warm.acceleration import Context, Phase
from ansible_operator.runner.warm.accelerations import (
    compiled_module_sources,
    kubeconfig_libyaml,
    preloaded_module_utils,
    warm_module_interpreter,
)
from ansible_operator.runner.warm.forkserver import listen, serve_forks
from ansible_operator.runner.warm.module_requests import SESSION_ENV, send_request

# Imported once, here. Ansible's own module_utils come from the installation
# the operator's ansible-playbook runs from, so they are the very code each
# module's payload carries: the payload's copy would only be compiled again
# (zipimport caches no bytecode), ~0.2 s per task. What the installation lacks
# (a role's library module, `ansible.legacy.<name>`) is found in the payload
# (`PayloadFinder`). Not `ansible_collections`: a collection's code may come
# from a collections path that differs from this interpreter's, so it always
# comes from the payload.
WARM_IMPORTS = (
    "ansible.module_utils.basic",
    "ansible.module_utils._internal._ansiballz._loader",
    "ansible.module_utils.common.dict_transformations",
    "ansible.module_utils.common.text.converters",
    "ansible.module_utils.six",
    "ansible.module_utils.urls",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.dynamic",
    "urllib3",
    "yaml",
    "jsonpatch",
)
SHIM_FILE = "python"  # in the warm runner's scratch directory
MAX_HEADER = 1 << 20
_session_groups: str | None = None  # in a run's session: the run's cgroups, joined
# The shim runs once per task: it imports only what the interpreter has built
# in (no `socket`, no `json`: ~15 ms less per task). marshal is safe here:
# only the operator's user can reach the server's socket.
SHIM = """#!{python} -IS
# ansible-operator's module interpreter shim (warm runner mode): hands this
# module run to its run's session of the warm interpreter, else to the warm
# interpreter at {socket}; without either, runs Python itself.
import _socket, marshal, os, sys
SERVER = {socket!r}
PYTHON = {python!r}
for address in (os.environ.get({session_env!r}), SERVER):
    if not address:
        continue
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(address)
        break
    except OSError:
        conn.close()
else:
    os.execv(PYTHON, [PYTHON] + sys.argv[1:])
request = marshal.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}})
data = str(len(request)).encode() + b"\\n" + request
fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
conn.sendmsg([data[:1]], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
conn.sendall(data[1:])
code = conn.recv(16)
sys.exit(int(code) if code.strip() else 1)
"""


def write_shim(path: Path, socket_path: Path) -> Path:
    """The interpreter runs name: hands each module run to `socket_path`."""
    path.write_text(
        SHIM.format(python=sys.executable, socket=str(socket_path), session_env=SESSION_ENV)
    )
    path.chmod(0o700)
    return path


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


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
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


def _exit_when_shim_goes(conn: socket.socket) -> None:
    """The run was killed (timeout, shutdown): its module goes with it, and
    so do the commands the module started (its process group)."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    with contextlib.suppress(OSError):
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(137)


def _serve_session(conn: socket.socket, request: dict[str, object]) -> NoReturn:
    """Become one run's own module interpreter: into the run's cgroup once,
    then its modules are forks of this process, born in the group. Moving a
    process into a group waits on the kernel (~10 ms on cgroup v1 here), which
    a module per task would pay each time. The session ends when the run
    closes its connection, or dies."""
    global _session_groups
    environment = request.get("env")
    if not isinstance(environment, dict):
        environment = {}
    groups = str(environment.get(cgroups.CGROUP_ENV, ""))
    cgroups.join(groups)
    priority.lower_this_process(environment)
    _session_groups = groups
    address = Path(str(request["session"]))
    listener = listen(address)
    threading.Thread(target=_end_session, args=(conn, address), daemon=True).start()
    serve_forks(listener, handle)


def _end_session(conn: socket.socket, address: Path) -> None:
    with contextlib.suppress(OSError):
        conn.recv(1)
    with contextlib.suppress(OSError):
        address.unlink()
    os._exit(0)


def open_session(server: Path, address: Path, groups: str, nice: int = 0) -> socket.socket | None:
    """From a run, in its cgroups (`groups`, as in CGROUP_ENV) and at its priority
    (`nice`): ask the module interpreter at `server` for a session of the run's own
    at `address`.
    Does not wait for it: until it listens, the run's modules go to `server`
    as before. Closing the socket returned (or the run's end) ends the session."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(server))
        environment = {cgroups.CGROUP_ENV: groups, priority.NICE_ENV: str(nice)}
        send_request(conn, {"session": str(address), "env": environment})
    except OSError:
        conn.close()
        return None
    return conn


def _close_in_fork(conn: socket.socket) -> None:
    """In any fork: the connection is its parent's. A fork of a fork finds
    it closed already (a session's module that forks)."""
    descriptor = conn.detach()
    if descriptor >= 0:
        os.close(descriptor)


def _run_child(conn: socket.socket) -> None:
    code = 1
    reporter = os.getpid()
    # A module may fork and outlive its run (async_wrapper does): only this
    # process reports the run's exit code to the shim.
    os.register_at_fork(after_in_child=lambda: _close_in_fork(conn))
    try:
        request, fds = _receive(conn)
        if isinstance(request.get("session"), str):
            _serve_session(conn, request)
        os.setpgid(0, 0)  # this module run and what it starts: one group to kill
        # A fork of ours, not of the run: into the run's cgroup (its memory
        # cap, its end), since what the module starts stays where it is. A
        # run's session is there already.
        environment = request.get("env")
        if isinstance(environment, dict):
            groups = str(environment.get(cgroups.CGROUP_ENV, ""))
            if groups != _session_groups:
                cgroups.join(groups)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
            os.close(fd)
        # Python's own stdio objects over the new descriptors.
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        threading.Thread(target=_exit_when_shim_goes, args=(conn,), daemon=True).start()
        # That thread is ours: a module that forks (async_wrapper) is not to be
        # told that its process has threads, which under Python it has not.
        warnings.filterwarnings(
            "ignore", r"This process \(pid=\d+\) is multi-threaded", DeprecationWarning
        )
        os.environ.clear()
        os.environ.update(request["env"])  # type: ignore[arg-type]
        tempfile.tempdir = None  # follow this run's TMPDIR, not the server's
        os.chdir(str(request["cwd"]))
        argv = [str(arg) for arg in request["argv"]]  # type: ignore[union-attr]
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.meta_path.append(PayloadFinder())
        acceleration.install_phase(Phase.MODULE, Context())
        acceleration.used(warm_module_interpreter.NAME)
        try:
            if argv and not argv[0].startswith("-"):
                sys.argv = argv
                runpy.run_path(argv[0], run_name="__main__")
            else:  # pipelining: the module arrives on stdin
                sys.argv = [""]
                source = sys.stdin.read()
                exec(compile(source, "<stdin>", "exec"), {"__name__": "__main__"})
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
    except BaseException as error:  # report, never raise into the server loop
        with contextlib.suppress(Exception):
            os.write(2, f"ansible-operator module server: {error!r}\n".encode())
    finally:
        if os.getpid() != reporter:
            os._exit(code)
        with contextlib.suppress(OSError):
            conn.sendall(str(code).encode())
        os._exit(0)


def preload() -> None:
    for name in WARM_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    acceleration.install_phase(Phase.MODULE_INTERPRETER, Context())


def handle(conn: socket.socket) -> NoReturn:
    _run_child(conn)
    os._exit(0)  # _run_child never returns


if __name__ == "__main__":
    die_with_parent()
    acceleration.probe(
        [
            compiled_module_sources.ACCELERATION,
            preloaded_module_utils.ACCELERATION,
            kubeconfig_libyaml.ACCELERATION,
        ],
        wait=False,
    )
    preload()
    acceleration.install_phase(Phase.MODULE_SERVER, Context())
    acceleration.settle()  # no module run inherits a check still answering
    listener = listen(Path(sys.argv[1]))
    print("ready", flush=True)
    serve_forks(listener, handle)
