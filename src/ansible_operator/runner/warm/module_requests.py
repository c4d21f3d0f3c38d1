"""How a module run is asked of the warm module interpreter (module_server.py).

One unix connection per request: `LENGTH\n`, a marshalled dict (`argv`,
`cwd`, `env`; or `session` and `env` for a run's own session of the
interpreter), and, with the first byte, the descriptors the module runs on
(stdin, stdout, stderr); the answer is the module's exit code. The shim the
runs name as their Python sends it (module_server.SHIM, which imports
nothing of ours), and so do a run's fork (a session) and a task worker
(accelerations/module_handoff.py).
"""

from __future__ import annotations

import array
import marshal
import socket
from collections.abc import Sequence

# Where a run's session of the interpreter listens (module_server._serve_session);
# in the run's environment, for the shim and for the task workers.
SESSION_ENV = "ANSIBLE_OPERATOR_MODULE_SESSION"


def send_request(conn: socket.socket, request: dict[str, object], fds: Sequence[int] = ()) -> None:
    """As the shim sends its request: `LENGTH\n`, the marshalled dict, and
    the descriptors to run the module on (stdin, stdout, stderr)."""
    body = marshal.dumps(request)
    data = str(len(body)).encode() + b"\n" + body
    if fds:
        conn.sendmsg([data[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data = data[1:]
    conn.sendall(data)
