"""The tier that starts Ansible (or another process: a module interpreter, git,
go, an exec plugin) but needs no cluster. Its fixtures."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def module_interpreter(tmp_path: Path) -> Iterator[Path]:
    """A warm module interpreter (runner/warm/module_server.py) of the test's own:
    the socket it listens on."""
    socket_path = tmp_path / "modules.sock"
    server = subprocess.Popen(
        [
            sys.executable,
            "-P",
            "-m",
            "ansible_operator.runner.warm.module_server",
            str(socket_path),
        ],
        stdout=subprocess.PIPE,
    )
    assert server.stdout is not None
    assert server.stdout.readline().strip() == b"ready"
    yield socket_path
    server.kill()
    server.wait()
