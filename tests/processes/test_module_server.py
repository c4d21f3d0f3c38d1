"""The warm module interpreter behaves as `python script.py` would: argv,
environment, working directory, stdin/stdout/stderr, exit code; and a killed
caller takes its module run down with it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from ansible_operator.runner.warm.module_server import write_shim

SCRIPT = """
import os, sys, time
print("argv", sys.argv[1:])
print("cwd", os.getcwd())
print("env", os.environ.get("PROBE"))
print("stdin", sys.stdin.read().strip())
print("warm", "kubernetes.client" in sys.modules)
print("to stderr", file=sys.stderr)
if os.environ.get("SLEEP"):
    open(os.environ["SLEEP"], "w").write(str(os.getpid()))
    time.sleep(60)
sys.exit(int(os.environ.get("CODE", "0")))
"""


@pytest.fixture
def shim(tmp_path: Path, module_interpreter: Path) -> Path:
    return write_shim(tmp_path / "python", module_interpreter)


def run(shim: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "module.py"
    script.write_text(SCRIPT)
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return subprocess.run(
        [str(shim), str(script), "x", "y"],
        input="from stdin",
        capture_output=True,
        text=True,
        cwd=workdir,
        env={**os.environ, **env},
        timeout=30,
        check=False,
    )


def test_runs_like_python_with_the_callers_process_context(shim: Path, tmp_path: Path) -> None:
    result = run(shim, tmp_path, PROBE="42", CODE="3")
    assert result.returncode == 3
    lines = result.stdout.splitlines()
    assert lines[0] == "argv ['x', 'y']"
    assert lines[1] == f"cwd {tmp_path / 'work'}"
    assert lines[2] == "env 42"
    assert lines[3] == "stdin from stdin"
    assert lines[4] == "warm True"  # imported once by the server, not per run
    assert result.stderr.strip() == "to stderr"


def test_without_the_server_the_shim_runs_python_itself(shim: Path, tmp_path: Path) -> None:
    (tmp_path / "modules.sock").unlink()
    result = run(shim, tmp_path)
    assert result.returncode == 0
    assert "warm False" in result.stdout


def test_killing_the_caller_ends_its_module_run(shim: Path, tmp_path: Path) -> None:
    script = tmp_path / "module.py"
    script.write_text(SCRIPT)
    marker = tmp_path / "pid"
    caller = subprocess.Popen(
        [str(shim), str(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "SLEEP": str(marker)},
    )
    deadline = time.monotonic() + 20
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline, "the module never started"
        time.sleep(0.05)
    module_pid = int(marker.read_text())
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{module_pid}").exists():
        assert time.monotonic() < deadline, "the module outlived its killed caller"
        time.sleep(0.05)


FORKING = """
import os, sys, time
if os.fork() == 0:  # like async_wrapper: a forked helper that exits on its own
    sys.exit(7)
time.sleep(0.5)
print("parent done")
sys.exit(0)
"""


def test_a_forked_child_does_not_speak_for_the_module(shim: Path, tmp_path: Path) -> None:
    script = tmp_path / "forking.py"
    script.write_text(FORKING)
    result = subprocess.run(
        [str(shim), str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0
    assert result.stdout.strip() == "parent done"


PAYLOAD_MAIN = """
import sys, zipfile
payload = sys.argv[1]
sys.path.insert(0, payload)  # as the AnsiballZ wrapper does with its payload
import ansible.module_utils.basic as basic
print("installed", basic.__file__.startswith(sys.prefix))
from ansible.legacy import role_module  # a role's library module: only in the payload
print(role_module.GREETING)
role_module.fail()
"""


def test_a_role_library_module_is_found_in_its_payload(shim: Path, tmp_path: Path) -> None:
    payload = tmp_path / "ansible_role_module_payload.zip"
    with zipfile.ZipFile(payload, "w") as archive:
        archive.writestr("ansible/__init__.py", "")
        archive.writestr(
            "ansible/legacy/role_module.py",
            'GREETING = "from the payload"\ndef fail():\n    raise SystemExit(5)\n',
        )
    script = tmp_path / "main.py"
    script.write_text(PAYLOAD_MAIN)
    result = subprocess.run(
        [str(shim), str(script), str(payload)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.stdout.splitlines() == ["installed True", "from the payload"], result.stderr
    assert result.returncode == 5
