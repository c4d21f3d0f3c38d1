"""A run's session serving the run's modules in one process (acceleration
`modules-in-one-process`; what that process puts back between two modules,
and when it may serve another: accelerations/modules_in_one_process.py).

The session (module_server._serve_session) forks a worker ahead of need and
hands it each module's connection while it is idle (over a socket pair, as
SCM_RIGHTS); a module that comes while the worker is busy gets a fork of its
own, as without it. When the worker ends (after a module that may have left
something behind, or after RETIRE_AFTER modules), the session forks the next
one at once, before it is needed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Callable
from typing import NoReturn

from ansible_operator.runner import cgroups
from ansible_operator.runner.warm import acceleration
from ansible_operator.runner.warm.acceleration import Context, Phase
from ansible_operator.runner.warm.accelerations import (
    modules_in_one_process,
    warm_module_interpreter,
)
from ansible_operator.runner.warm.accelerations.modules_in_one_process import ProcessState
from ansible_operator.runner.warm.forkserver import handle_in_fork, reap
from ansible_operator.runner.warm.module_run import (
    PayloadFinder,
    enter,
    ignore_our_threads_in_forks,
    receive_request,
    run_groups,
    run_program,
)

RETIRE_AFTER = 64  # modules: what a long role's payloads leave in memory stays bounded
# The worker to its session: a module has ended (its caller is told next), and
# then, once the process is put back, IDLE (ready for the next) or its end.
ENDED = b"e"
IDLE = b"i"
PUT_BACK_WAIT = 2.0  # seconds a session waits for an ended module's process to be put back
Handle = Callable[[socket.socket], NoReturn]


class _Worker:
    """The session's side of its worker."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.idle = True
        self.putting_back = False  # a module ended: IDLE or the worker's end comes next

    @classmethod
    def start(cls, groups: str, *not_its: socket.socket) -> _Worker:
        """A worker forked now; `not_its`: the session's sockets it must not hold
        (a caller's, whose end it would delay)."""
        ours, theirs = socket.socketpair()
        if os.fork() == 0:
            for sock in (*not_its, ours):
                sock.close()
            _work(theirs, groups)
        theirs.close()
        return cls(ours)

    def give(self, conn: socket.socket) -> bool:
        """The module on `conn` to the worker: whether it took it."""
        try:
            socket.send_fds(self.control, [b"m"], [conn.fileno()])
        except OSError:
            return False
        conn.close()
        self.idle = False
        return True

    def heard(self) -> bool:
        """What the worker said: False once it has ended."""
        try:
            said = self.control.recv(64)
        except TimeoutError:
            raise  # put_back's wait is over: the worker has not ended
        except OSError:
            said = b""
        for message in said:
            self.putting_back = message == ENDED[0]
            self.idle = message == IDLE[0]
        return bool(said)

    def put_back(self) -> bool:
        """After a module ended: wait for the verdict (False once it has ended).
        The caller of that module may send its next one before the worker has
        put its process back (a few ms): that one waits for it, not for a fork."""
        self.control.settimeout(PUT_BACK_WAIT)
        try:
            while self.putting_back:
                if not self.heard():
                    return False
        except TimeoutError:
            pass  # still putting back: the next module gets a fork
        finally:
            self.control.settimeout(None)
        return True


def serve_session(listener: socket.socket, handle: Handle, groups: str) -> NoReturn:
    """Serve a run's session (in `groups`, its cgroups): each module to the
    worker when it is idle, else to a fork (`handle`)."""
    gc.freeze()  # what the forks share: our collector must not copy it
    signal.signal(signal.SIGCHLD, reap)
    worker = _Worker.start(groups, listener)
    while True:
        readable, _, _ = select.select([listener, worker.control], [], [])
        if worker.control in readable and not worker.heard():
            worker.control.close()
            worker = _Worker.start(groups, listener)
        if listener in readable:
            conn, _ = listener.accept()
            if worker.putting_back and not worker.put_back():
                worker.control.close()
                worker = _Worker.start(groups, listener, conn)
            if not (worker.idle and worker.give(conn)):
                handle_in_fork(listener, conn, handle, worker.control)


# ----- the worker ------------------------------------------------------------------
class _CallerWatch:
    """While a module runs: if its caller goes (the run was killed or timed
    out), the module goes, with what it started (the worker's process group)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.recv(1)
        if self.done.is_set():
            return
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(137)

    def finish(self) -> None:
        self.done.set()
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RD)  # wakes the watching thread
        if self.thread.ident is not None:
            self.thread.join()


_inherited: list[socket.socket] = []  # the worker's sockets: none of a module's forks keeps them


def _close_inherited() -> None:
    for sock in _inherited:
        descriptor = sock.detach()
        if descriptor >= 0:
            os.close(descriptor)
    _inherited.clear()


def _work(control: socket.socket, groups: str) -> NoReturn:
    try:
        _serve_until_retired(control, groups)
    finally:
        os._exit(0)  # never back into the session's loop, whatever happened


def _serve_until_retired(control: socket.socket, groups: str) -> None:
    # Not killed with its session (no parent-death signal): that would leave
    # what a running module started behind. A module in flight goes when its
    # caller goes (_CallerWatch), as a fork of the session's does; an idle
    # worker ends when its session's end closes `control` (the session's
    # other forks do not hold it); the run's cgroup holds it too.
    os.setpgid(0, 0)  # the worker and what its modules start: one group to kill
    _inherited.append(control)
    os.register_at_fork(after_in_child=_close_inherited)
    sys.meta_path.append(PayloadFinder())
    modules_in_one_process.record_modules_run()
    ignore_our_threads_in_forks()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    modules_in_one_process.forget_exit_functions()
    gc.collect()  # as after each module: what is captured is what a module finds
    state = ProcessState.capture()
    worker = os.getpid()
    for _served in range(RETIRE_AFTER):
        try:
            said, fds, _flags, _address = socket.recv_fds(control, 16, 1)
        except OSError:
            break
        if not said or not fds:
            break  # the session has ended
        conn = socket.socket(fileno=fds[0])
        _inherited.append(conn)
        with conn:
            served = _serve(conn, control, state, groups, worker)
        _inherited.remove(conn)
        if not served:
            break


def _serve(
    conn: socket.socket, control: socket.socket, state: ProcessState, groups: str, worker: int
) -> bool:
    """One module, as a fork of the session would run it: whether this
    process serves the next one. The session hears that the module ended
    before its caller does: the caller's next module waits for the verdict,
    while the process is put back off the caller's path."""
    code = 1
    known = False
    watch = _CallerWatch(conn)
    try:
        request, fds = receive_request(conn)
        moved = run_groups(request) != groups
        if moved:
            cgroups.join(run_groups(request))
        watch.thread.start()
        enter(request, fds)
        acceleration.install_phase(Phase.MODULE, Context())
        acceleration.used(warm_module_interpreter.NAME)
        acceleration.used(modules_in_one_process.NAME)
        modules_in_one_process.start_program()
        with warnings.catch_warnings():
            code = run_program(request)
            modules_in_one_process.run_atexit_functions()
        known = not moved and modules_in_one_process.program_ran_known_modules()
    except BaseException as error:  # report, never raise into the worker's loop
        with contextlib.suppress(Exception):
            os.write(2, f"ansible-operator module worker: {error!r}\n".encode())
    finally:
        if os.getpid() != worker:  # a fork the module made, back here: not ours to go on
            os._exit(code)
        state.restore_stdio()  # the module's stdio closed: its caller reads their end
        watch.finish()
        with contextlib.suppress(OSError):
            control.sendall(ENDED)  # before its caller hears: its next module waits for us
        with contextlib.suppress(OSError):
            conn.sendall(str(code).encode())
            conn.shutdown(socket.SHUT_WR)  # the answer's end: a task worker reads to it
    # Its caller goes on meanwhile: the rest is put back off its path.
    state.restore()
    # What the module made and dropped goes, and with it what it holds open
    # (a client's connections), as its exit would have closed them.
    gc.collect()
    again = known and not state.left_behind(open_now={conn.fileno()})
    if again:
        with contextlib.suppress(OSError):
            control.sendall(IDLE)
    return again
