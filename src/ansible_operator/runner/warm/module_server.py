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

import contextlib
import importlib
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import NoReturn

from ansible_operator.runner import cgroups, priority
from ansible_operator.runner.lifetime import die_with_parent
from ansible_operator.runner.warm import acceleration, module_worker
from ansible_operator.runner.warm.acceleration import Context, Phase
from ansible_operator.runner.warm.accelerations import (
    compiled_module_sources,
    kubeconfig_libyaml,
    modules_in_one_process,
    preloaded_module_utils,
    warm_module_interpreter,
)
from ansible_operator.runner.warm.forkserver import listen, serve_forks
from ansible_operator.runner.warm.module_requests import SESSION_ENV, send_request
from ansible_operator.runner.warm.module_run import (
    PayloadFinder,
    enter,
    ignore_our_threads_in_forks,
    receive_request,
    run_groups,
    run_program,
)

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
    if modules_in_one_process.switched_on():
        module_worker.serve_session(listener, handle, groups)
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
        request, fds = receive_request(conn)
        if isinstance(request.get("session"), str):
            _serve_session(conn, request)
        os.setpgid(0, 0)  # this module run and what it starts: one group to kill
        # A fork of ours, not of the run: into the run's cgroup (its memory
        # cap, its end), since what the module starts stays where it is. A
        # run's session is there already.
        groups = run_groups(request)
        if groups != _session_groups:
            cgroups.join(groups)
        threading.Thread(target=_exit_when_shim_goes, args=(conn,), daemon=True).start()
        ignore_our_threads_in_forks()
        enter(request, fds)
        sys.meta_path.append(PayloadFinder())
        acceleration.install_phase(Phase.MODULE, Context())
        acceleration.used(warm_module_interpreter.NAME)
        code = run_program(request)
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
            modules_in_one_process.ACCELERATION,
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
