"""A warm ansible-runner: runs fork from an interpreter that has already
imported ansible-runner and Ansible.

A reconcile in `reference` mode starts `python -m ansible_runner run`, which
starts `ansible-playbook`: two fresh interpreters importing ~1 s of Python
before the first task. Here one server process imports all of that once;
each run is a fork of it (the *runner*), which executes exactly what
`ansible-runner run ARGS` executes (`ansible_runner.__main__.main`: the same
run directory, artifacts, events and plugins). Where ansible-runner would
start `ansible-playbook` in a pseudo-terminal, the runner forks again and
calls `ansible-playbook`'s entry point in that fork, on that terminal, with
the run's environment and working directory.

Ansible reads its configuration into `ansible.constants` and its plugin
loaders when it is imported. The server imports it with the environment a
run gets (ansible-runner's own additions included); a run whose Ansible
environment differs only in settings that Ansible reads at run time gets
those re-read, and any other difference makes that run start the real
`ansible-playbook` instead, so a run never sees stale configuration.

What makes a run faster than that (ansible-playbook in the fork among it,
accelerations/playbook_in_fork.py) is a list of accelerations (accelerations/), each probed
here at start-up against the installed versions: one that does not apply
stays off, and the run gets the stock behaviour for it. Those that are on
are installed at each phase (acceleration.Phase): here before serving, in
each run's fork, in its ansible-playbook. The `ready` line reports each
verdict; the file `acceleration-hits` counts how often each was used.

Protocol (one unix connection per run, the operator's alone): the operator
sends one JSON line `{"argv": [...], "env": {...}, "cwd": "..."}` (argv as
for `ansible-runner`); the server answers `pid <runner pid>` then, when the
run ends, `exit <code>`. The runner leads its own process group; if the
connection drops (the operator timed the run out, shut down or died) the
runner kills the whole run.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, NoReturn

from ansible_operator.runner import cgroups, priority, proctree
from ansible_operator.runner.lifetime import die_with_parent
from ansible_operator.runner.warm import acceleration, hits, module_server
from ansible_operator.runner.warm.acceleration import Context, Phase
from ansible_operator.runner.warm.accelerations import (
    ACCELERATIONS,
    module_handoff,
    warm_module_interpreter,
)
from ansible_operator.runner.warm.ansible_settings import remember_preload_settings
from ansible_operator.runner.warm.forkserver import MAX_REQUEST, listen, serve_forks

# What every run imports. Not ansible-runner's display callback: it reads the
# run's artifact directory from the environment when it is imported.
WARM_IMPORTS = (
    "ansible_runner.__main__",
    "ansible_runner.interface",
    "ansible_runner.runner",
    "pexpect",
    "ansible.cli.playbook",
    "ansible.executor.playbook_executor",
    "ansible.executor.task_executor",
    "ansible.executor.process.worker",
    "ansible.plugins.loader",
    "ansible.plugins.strategy.linear",
    "ansible.plugins.action.normal",
    "ansible.plugins.action.command",
    "ansible.plugins.connection.local",
    "ansible.plugins.shell.sh",
    "ansible.plugins.callback.default",
    "ansible.template",
    "ansible.vars.manager",
    "ansible.inventory.manager",
    "ansible.parsing.dataloader",
    "ansible.playbook.play",
    "ansible.playbook.role",
    "jinja2",
    "yaml",
)
_context = Context()  # what the accelerations' installers are told
_module_socket = Path()  # the warm module interpreter's
SESSION_END_WAIT = 1.0  # seconds


def runner_environment(scratch: Path) -> dict[str, str]:
    """The environment ansible-runner gives a playbook run started from here."""
    config = acceleration.runner_config_in(scratch / "probe")
    return {str(key): str(value) for key, value in config.env.items()}


# ----- the runner (one fork per run) -------------------------------------------
class _Run:
    def kill(self) -> None:
        """This run's whole tree: ansible-playbook leads a session of its own
        and each of its workers a process group of its own."""
        everything = proctree.tree(os.getpid())
        proctree.signal_all(everything[1:], signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpid(), signal.SIGKILL)


def _watch_connection(conn: socket.socket, run: _Run) -> None:
    with contextlib.suppress(OSError):
        conn.recv(1)
    run.kill()


def _runner(conn: socket.socket) -> None:
    code = 1
    run = _Run()
    session: socket.socket | None = None
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # pexpect waits for its child
        os.setsid()
        request = _read_request(conn)
        # Into the run's cgroup before anything is started: all it starts stays there.
        cgroups.join(str(request["env"].get(cgroups.CGROUP_ENV, "")))
        priority.lower_this_process(request["env"])
        conn.sendall(f"pid {os.getpid()}\n".encode())
        signal.signal(signal.SIGTERM, lambda _signum, _frame: run.kill())
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        os.close(null)
        os.environ.clear()
        os.environ.update(request["env"])
        session = _open_module_session()
        tempfile.tempdir = None
        os.chdir(request["cwd"])
        threading.Thread(target=_watch_connection, args=(conn, run), daemon=True).start()
        acceleration.install_phase(Phase.RUN, _context)
        from ansible_runner.__main__ import main

        argv = [str(arg) for arg in request["argv"]]
        code = int(main(argv) or 0)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException as error:
        with contextlib.suppress(OSError):
            conn.sendall(f"error {error!r}\n".encode())
    finally:
        if session is not None:
            _close_module_session(session)
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code}\n".encode())
        os._exit(code)


def _close_module_session(session: socket.socket) -> None:
    """End the run's session, and wait (briefly) until it has: gone before the
    run's end is reported, it is not among what the operator kills then."""
    with contextlib.suppress(OSError):
        session.shutdown(socket.SHUT_WR)  # not close(): this run's forks hold it too
        session.settimeout(SESSION_END_WAIT)
        session.recv(1)  # its end closes when it exits


def _open_module_session() -> socket.socket | None:
    """In the run's cgroup, with the run's environment: the run's own session
    of the warm module interpreter, named in the environment the run passes on."""
    if not acceleration.enabled(warm_module_interpreter.NAME):
        return None
    address = _module_socket.parent / f"modules-{os.getpid()}.sock"
    groups = os.environ.get(cgroups.CGROUP_ENV, "")
    session = module_server.open_session(
        _module_socket, address, groups, priority.run_nice(os.environ)
    )
    if session is not None:
        os.environ[module_server.SESSION_ENV] = str(address)
    return session


def _read_request(conn: socket.socket) -> dict[str, Any]:
    buffer = bytearray()
    while not buffer.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk or len(buffer) > MAX_REQUEST:
            raise ConnectionError("incomplete request")
        buffer += chunk
    return json.loads(buffer)


# ----- the server ---------------------------------------------------------------
def _start_module_server(module_socket: Path, switched_off: list[str]) -> None:
    """The warm module interpreter, forked before Ansible's controller side is
    imported here: it has only what modules need, and the Python and
    libraries both load are in memory once."""
    # A probe that checks in a fork does so while the module interpreter's imports go on.
    acceleration.probe((a for a in ACCELERATIONS if a.side == "modules"), switched_off, wait=False)
    module_server.preload()
    acceleration.settle()  # a check's answer is read here, not by both processes
    listener = listen(module_socket)
    gc.freeze()  # our collector must not walk (and so copy) what the fork shares
    if os.fork() == 0:
        die_with_parent()
        acceleration.install_phase(Phase.MODULE_SERVER, Context())
        gc.freeze()  # and what it imported since, for the runs' sessions
        serve_forks(listener, module_server.handle)
    listener.close()


def serve(
    run_socket: Path,
    module_socket: Path,
    scratch: Path,
    targets: list[dict[str, str]],
    switched_off: list[str],
) -> None:
    """`targets`: the watches' roles and playbooks (`{"role": path}` or
    `{"playbook": path}`), whose module payloads are built ahead;
    `switched_off`: accelerations the operator was told not to use."""
    die_with_parent()
    shim = module_server.write_shim(scratch / module_server.SHIM_FILE, module_socket)
    warm_module_interpreter.configure(shim)
    module_handoff.configure(shim, module_socket)
    counters = hits.HitCounters.create(scratch / hits.HITS_FILE, [a.name for a in ACCELERATIONS])
    hits.use(counters)
    _start_module_server(module_socket, switched_off)
    # Ansible's configuration as a run sees it: ansible-runner's additions
    # (callback plugins, stdout callback, ...) on top of the operator's.
    os.environ.update(runner_environment(scratch))
    os.chdir(scratch)  # no ansible.cfg here, as in a run's project directory
    global _context, _module_socket
    _context = Context(scratch=scratch, targets=tuple(targets))
    _module_socket = module_socket
    (scratch / "templates").mkdir(mode=0o700, exist_ok=True)
    remember_preload_settings(dict(os.environ))
    for name in WARM_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # Probes that check in a fork answer while this process installs the rest.
    acceleration.probe((a for a in ACCELERATIONS if a.side == "runs"), switched_off, wait=False)
    counters.reset()  # what the probes did is not a use (their forks count nothing)
    acceleration.install_phase(Phase.WARM_RUNNER, _context)
    acceleration.settle()  # before any run is forked: each knows what is on
    verdicts = {a.name: acceleration.verdict(a.name) for a in ACCELERATIONS}
    # Made when Ansible's settings were read; each run makes (and removes) its own.
    from ansible import constants

    shutil.rmtree(constants.DEFAULT_LOCAL_TMP, ignore_errors=True)
    listener = listen(run_socket)
    report = {name: verdict.as_json() for name, verdict in verdicts.items()}
    print(f"ready {json.dumps(report)}", flush=True)
    if targets and acceleration.installers(Phase.BACKGROUND) and os.fork() == 0:
        listener.close()
        os.nice(10)  # runs come first
        acceleration.install_phase(Phase.BACKGROUND, _context)
        os._exit(0)
    serve_forks(listener, _handle)


def _handle(conn: socket.socket) -> NoReturn:
    _runner(conn)
    os._exit(1)  # _runner never returns


if __name__ == "__main__":
    serve(
        Path(sys.argv[1]),
        Path(sys.argv[2]),
        Path(sys.argv[3]),
        json.loads(sys.argv[4]),
        json.loads(sys.argv[5]),
    )
