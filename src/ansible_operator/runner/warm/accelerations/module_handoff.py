"""A task worker hands its module to the warm module interpreter itself
(warm runs; acceleration `module-handoff`).

With the warm module interpreter, Ansible's local connection runs a
pipelined module as `/bin/sh -c '/bin/sh -c "NAME=value ... <shim>"'`: two
shells and a Python start (~20 ms a task) whose only work is passing the
shim's environment, working directory and stdio to the warm interpreter.
Here the worker sends that same request itself, with pipes it holds, and
reads the module's output and exit code as the stock path would.

Only a command this module can rebuild byte for byte from what it parsed
(the executable, `-c`, quoted assignments as Ansible's `sh` shell writes
them, the shim, up to 2.18 `&& sleep 0`) is handed off, and only without become; anything else, or a
warm interpreter that does not answer, goes the stock way.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shlex
import socket
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    parameters_of,
    require,
    used,
)
from ansible_operator.runner.warm.accelerations.warm_module_interpreter import (
    NAME as MODULE_INTERPRETER,
)
from ansible_operator.runner.warm.module_requests import SESSION_ENV, send_request

NAME = "module-handoff"
_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PIPE_CHUNK = 65536
_shim = ""  # the interpreter path runs name (the warm runner's shim)
_server = ""  # the warm module interpreter's own socket


def configure(shim: Path, server: Path) -> None:
    """In the warm runner, before runs fork from it."""
    global _shim, _server
    _shim, _server = str(shim), str(server)


def assignments(command: str, executable: str, shim: str) -> dict[str, str] | None:
    """The environment assignments of `<executable> -c '<NAME=value ...> <shim>'`
    (with ` && sleep 0` after it, as up to ansible-core 2.18), or None for any
    other command."""
    with contextlib.suppress(ValueError):
        words = shlex.split(command)
        if len(words) != 3 or words[:2] != [executable, "-c"]:
            return None
        if command != f"{executable} -c {shlex.quote(words[2])}":
            return None
        *pairs, program = shlex.split(words[2])
        # Up to 2.18, Ansible appends `&& sleep 0`: the module's exit code either way.
        tail = ""
        if pairs[-3:] == [shim, "&&", "sleep"] and program == "0":
            *pairs, program = pairs[:-2]
            tail = " && sleep 0"
        if program != shim:
            return None
        environment: dict[str, str] = {}
        for pair in pairs:
            name, equals, value = pair.partition("=")
            if not equals or not _NAME_PATTERN.match(name) or name in environment:
                return None
            environment[name] = value
        rebuilt = [f"{name}={shlex.quote(value)}" for name, value in environment.items()]
        if " ".join([*rebuilt, shlex.quote(program)]) + tail != words[2]:
            return None
        return environment
    return None


def _connect() -> socket.socket | None:
    for address in (os.environ.get(SESSION_ENV), _server):
        if not address:
            continue
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(address)
        except OSError:
            conn.close()
            continue
        return conn
    return None


def hand_off(
    environment: dict[str, str], cwd: str, in_data: bytes
) -> tuple[int, bytes, bytes] | None:
    """Run a pipelined module in the warm interpreter, as the shim would have
    under `environment` in `cwd`: (exit code, stdout, stderr), or None if no
    warm interpreter answers (nothing was run)."""
    conn = _connect()
    if conn is None:
        return None
    with conn:
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        stderr_read, stderr_write = os.pipe()
        theirs = (stdin_read, stdout_write, stderr_write)
        try:
            send_request(conn, {"argv": [], "cwd": cwd, "env": environment}, theirs)
        except OSError:
            for fd in (*theirs, stdin_write, stdout_read, stderr_read):
                os.close(fd)
            return None
        for fd in theirs:
            os.close(fd)
        stdout, stderr = _communicate(stdin_write, stdout_read, stderr_read, in_data)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := conn.recv(16):
                answer += chunk
    # As the shim's `sys.exit(int(code))` reaches its parent: one byte; no
    # answer (the interpreter died) is 1.
    code = int(answer) % 256 if answer.strip().lstrip(b"-").isdigit() else 1
    return code, stdout, stderr


def _communicate(stdin: int, stdout: int, stderr: int, in_data: bytes) -> tuple[bytes, bytes]:
    """Write `in_data` and read both outputs to their ends, together (a module
    may write before it has read all of its input)."""
    output = {stdout: bytearray(), stderr: bytearray()}
    pending = memoryview(in_data)
    os.set_blocking(stdin, False)
    with selectors.DefaultSelector() as selector:
        if pending:
            selector.register(stdin, selectors.EVENT_WRITE)
        else:
            os.close(stdin)
        for fd in output:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            for key, _events in selector.select():
                fd = key.fd
                if fd == stdin:
                    try:
                        pending = pending[os.write(fd, pending[:_PIPE_CHUNK]) :]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(fd)
                        os.close(fd)
                    continue
                chunk = os.read(fd, _PIPE_CHUNK)
                if chunk:
                    output[fd] += chunk
                else:
                    selector.unregister(fd)
                    os.close(fd)
    return bytes(output[stdout]), bytes(output[stderr])


def probe() -> None:
    from ansible import constants
    from ansible.plugins.connection.local import Connection
    from ansible.plugins.shell.sh import ShellModule

    missing = {"cmd", "in_data", "sudoable"} - parameters_of(Connection.exec_command)
    require(not missing, f"the local connection's exec_command takes no {', '.join(missing)}")
    executable = (constants.DEFAULT_EXECUTABLE or "").split()
    require(executable, "ansible has no DEFAULT_EXECUTABLE")
    # The command Ansible builds for a pipelined module with an environment,
    # as ActionBase._low_level_execute_command wraps it in the executable.
    shell = ShellModule()
    expected = {"FOO": "a b'c", "BAR": "$HOME"}
    inner = shell.build_module_command(shell.env_prefix(**expected), "#!/shim", "")
    command = f"{executable[0]} -c {shlex.quote(inner)}"
    found = assignments(command, executable[0], "/shim")
    require(
        found == expected,
        f"ansible's sh shell writes a module's command as {inner!r}, not as expected",
    )


def install() -> None:
    from ansible import constants
    from ansible.plugins.connection import ConnectionBase
    from ansible.plugins.connection.local import Connection
    from ansible.utils.display import Display

    display = Display()
    stock = Connection.exec_command
    executable = (constants.DEFAULT_EXECUTABLE or "").split()[0]

    def exec_command(
        self: Any, cmd: Any, in_data: bytes | None = None, sudoable: bool = True
    ) -> tuple[int, bytes, bytes]:
        environment = None
        if isinstance(cmd, str) and in_data is not None and not (sudoable and self.become):
            environment = assignments(cmd, executable, _shim)
        if environment is not None:
            # As the stock method does first: connect, if not yet.
            ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
            # Ansible 2.18 may set it as bytes (Popen takes either).
            cwd = os.fsdecode(self.cwd) if self.cwd else str(Path.cwd())
            # What the shim would have been started with: the worker's
            # environment, the assignments, and the PWD the shell exports.
            done = hand_off({**os.environ, **environment, "PWD": cwd}, cwd, in_data or b"")
            if done is not None:
                display.vvv(f"EXEC {cmd} (handed to the warm module interpreter)")
                used(NAME)
                return done
        return stock(self, cmd, in_data, sudoable)

    Connection.exec_command = exec_command  # type: ignore[method-assign]


ACCELERATION = Acceleration(
    name=NAME,
    saves="two shells and a Python start per task: the task worker hands its "
    "module to the warm module interpreter itself",
    relies_on="the local connection's exec_command(cmd, in_data, sudoable); the sh shell's "
    "env_prefix and build_module_command; ActionBase wrapping a command in "
    "`DEFAULT_EXECUTABLE -c`",
    probe=probe,
    installs=(Install(Phase.PLAYBOOK, lambda _context: install()),),
    needs=(MODULE_INTERPRETER,),
)
