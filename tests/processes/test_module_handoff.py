"""A task worker's hand-off to the warm module interpreter gives what the
shim gives for the same pipelined module (output, exit code, environment,
working directory), parses only the commands it can rebuild exactly, and a
run's session of the interpreter serves its modules until the run lets go.
Real module interpreter processes; no Ansible run."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ansible_operator.runner.warm.accelerations import module_handoff
from ansible_operator.runner.warm.accelerations.module_handoff import assignments, hand_off
from ansible_operator.runner.warm.module_server import SESSION_ENV, open_session, write_shim
from ansible_operator.testing.waiting import eventually

SHIM = "/scratch/warm-runner/python"
# A pipelined module: the program is the interpreter's stdin.
PROGRAM = """
import os, sys
print("cwd", os.getcwd())
print("probe", os.environ.get("PROBE"))
print("pwd", os.environ.get("PWD"))
print("parent", os.getppid())
print("warm", "kubernetes.client" in sys.modules)
print("to stderr", file=sys.stderr)
size = int(os.environ.get("BIG", "0"))
if size:
    sys.stdout.write("o" * size)
    sys.stderr.write("e" * size)
sys.exit(int(os.environ.get("CODE", "0")))
"""


@pytest.fixture
def server(tmp_path: Path, module_interpreter: Path) -> Iterator[Path]:
    module_handoff.configure(tmp_path / "python", module_interpreter)
    yield module_interpreter
    module_handoff.configure(Path(), Path())


def through_shim(shim: Path, cwd: Path, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """As Ansible's local connection runs it: `/bin/sh -c '/bin/sh -c "<shim>"'`."""
    done = subprocess.run(
        f"/bin/sh -c {shlex.quote(str(shim))}",
        shell=True,
        executable="/bin/sh",
        input=PROGRAM.encode(),
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=30,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def parent_of_module(cwd: Path) -> int:
    """The pid of the interpreter a module run was handed to."""
    code, stdout, _ = hand_off(dict(os.environ), str(cwd), PROGRAM.encode())
    assert code == 0
    return int(stdout.split(b"parent ")[1].split()[0])


def listening_session(server: Path, address: Path) -> socket.socket:
    """A run's session of the interpreter at `server`, once it listens at `address`."""
    session = open_session(server, address, "")
    assert session is not None
    eventually(address.exists, timeout=10, interval=0.02, what="the session listening")
    return session


def without_parent(stdout: bytes) -> list[bytes]:
    return [line for line in stdout.splitlines() if not line.startswith(b"parent ")]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (f"/bin/sh -c {SHIM}", {}),
        (
            "/bin/sh -c '"
            + """FOO='"'"'a b'"'"'"'"'"'"'"'"'c'"'"' BAR='"'"'$HOME'"'"' """
            + f"{SHIM}'",
            {"FOO": "a b'c", "BAR": "$HOME"},
        ),
        ("/bin/sh -c 'A=1 " + SHIM + "'", {"A": "1"}),
        (f"/bin/sh -c '{SHIM} && sleep 0'", {}),  # as up to ansible-core 2.18
        (f"/bin/sh -c 'A=1 {SHIM} && sleep 0'", {"A": "1"}),
    ],
)
def test_the_commands_ansible_writes_are_taken_apart(
    command: str, expected: dict[str, str]
) -> None:
    assert assignments(command, "/bin/sh", SHIM) == expected


@pytest.mark.parametrize(
    "command",
    [
        f"/bin/sh -c '{SHIM} && sleep 1'",  # another command after the module
        f"/bin/sh -c '{SHIM} && sleep 0 && rm -rf x'",
        f"/bin/sh -c '{SHIM} ; sleep 0'",
        f"/bin/sh -c '{SHIM} /tmp/AnsiballZ_k8s.py'",  # a module file: not pipelined
        "/bin/sh -c /usr/bin/python3",  # not our interpreter
        f"/bin/bash -c {SHIM}",  # another executable
        f"/bin/sh -c 'sudo -H -S -n -u root /bin/sh -c '\"'\"'{SHIM}'\"'\"''",  # become
        f"/bin/sh -c 'A=$(id) {SHIM}'",  # a substitution the shell would run
        f"/bin/sh -c 'A=1 A=2 {SHIM}'",  # the same name twice
        f"/bin/sh -c '1A=x {SHIM}'",  # not a variable name
        f"/bin/sh -c   {SHIM}",  # spaced as Ansible never writes it
        f"/bin/sh -c 'A=1;{SHIM}'",
        "/bin/sh -c 'unterminated",
    ],
)
def test_any_other_command_goes_the_stock_way(command: str) -> None:
    assert assignments(command, "/bin/sh", SHIM) is None


def test_the_probe_passes_on_this_ansible() -> None:
    module_handoff.probe()


def test_a_handed_off_module_gets_what_the_shim_would_give(server: Path, tmp_path: Path) -> None:
    shim = write_shim(tmp_path / "python", server)
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {**os.environ, "PROBE": "42", "CODE": "3"}
    env.pop("PWD", None)
    code, stdout, stderr = hand_off({**env, "PWD": str(workdir)}, str(workdir), PROGRAM.encode())
    stock = through_shim(shim, workdir, env)
    assert (code, without_parent(stdout), stderr) == (stock[0], without_parent(stock[1]), stock[2])
    assert code == 3
    assert without_parent(stdout) == [
        f"cwd {workdir}".encode(),
        b"probe 42",
        f"pwd {workdir}".encode(),  # as /bin/sh exports it
        b"warm True",
    ]
    assert stderr == b"to stderr\n"


def test_large_outputs_on_both_streams_do_not_stall_it(server: Path, tmp_path: Path) -> None:
    size = 4 << 20  # far over a pipe's buffer, on both streams
    code, stdout, stderr = hand_off(
        {**os.environ, "BIG": str(size)}, str(tmp_path), PROGRAM.encode() + b"#" * size
    )
    assert code == 0
    assert stdout.endswith(b"o" * size) and stderr.endswith(b"e" * size)


def test_without_an_interpreter_nothing_is_run(tmp_path: Path) -> None:
    module_handoff.configure(tmp_path / "python", tmp_path / "no-such.sock")
    try:
        assert hand_off(dict(os.environ), str(tmp_path), PROGRAM.encode()) is None
    finally:
        module_handoff.configure(Path(), Path())


def test_a_runs_session_serves_its_modules_until_the_run_lets_go(
    server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_pid = parent_of_module(tmp_path)
    address = tmp_path / "session.sock"
    session = listening_session(server, address)
    monkeypatch.setenv(SESSION_ENV, str(address))  # as in a run's task worker
    session_pid = parent_of_module(tmp_path)
    assert session_pid not in (os.getpid(), server_pid)
    env = dict(os.environ)
    # The shim goes to the session too, and to the server when there is none.
    shim = write_shim(tmp_path / "python", server)
    through_session = through_shim(shim, tmp_path, env)[1]
    assert f"parent {session_pid}".encode() in through_session
    session.close()
    eventually(
        lambda: not Path(f"/proc/{session_pid}").exists() and not address.exists(),
        timeout=10,
        interval=0.02,
        what="the session gone with its run's connection",
    )
    code, stdout, _ = through_shim(shim, tmp_path, env)
    assert code == 0
    assert f"parent {server_pid}".encode() in stdout


FORKING = b"""
import os, sys
child = os.fork()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
print("forked")
"""


def test_a_module_that_forks_in_a_session_says_nothing_more(
    server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = tmp_path / "session.sock"
    session = listening_session(server, address)
    monkeypatch.setenv(SESSION_ENV, str(address))
    assert hand_off(dict(os.environ), str(tmp_path), FORKING) == (0, b"forked\n", b"")
    session.close()
