"""What the warm processes share: a private unix socket, a fork per
connection, children reaped (each dies with its parent: runner/lifetime.py)."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

MAX_REQUEST = 16 << 20  # bytes of one request to a warm process (a run's, the warm runner's)


def listen(socket_path: Path) -> socket.socket:
    """Listening at `socket_path` once the path exists: bound and listening
    under another name first (a client that finds the path is never refused,
    as it would be between bind and listen)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pending = socket_path.with_name(socket_path.name + "~")
    for stale in (socket_path, pending):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    old_umask = os.umask(0o177)  # the socket is the operator's alone
    try:
        server.bind(str(pending))
    finally:
        os.umask(old_umask)
    server.listen(128)
    pending.rename(socket_path)
    return server


def reap(_signum: int, _frame: object) -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def serve_forks(server: socket.socket, handle: Callable[[socket.socket], NoReturn]) -> NoReturn:
    """Each connection is handled in a fork of this process."""
    # What is imported by now is shared with every fork, copy-on-write: the
    # garbage collector of a fork would write to (and so copy) all of it.
    gc.freeze()
    # Reap finished children as they end, so their CPU time is accounted to
    # this process (and through it to the operator), as a run's processes are.
    signal.signal(signal.SIGCHLD, reap)
    while True:
        conn, _ = server.accept()
        handle_in_fork(server, conn, handle)


def handle_in_fork(
    server: socket.socket,
    conn: socket.socket,
    handle: Callable[[socket.socket], NoReturn],
    *not_its: socket.socket,
) -> None:
    """`conn` handled in a fork, which holds none of `server` and `not_its`."""
    if os.fork() == 0:
        for sock in (server, *not_its):
            sock.close()
        handle(conn)
    conn.close()
