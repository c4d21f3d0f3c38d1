"""Fixtures shared by the unit tests that run Ansible for real."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ansible_operator.runner.receiver import EventReceiver


@pytest.fixture
async def receiver(tmp_path: Path) -> AsyncIterator[EventReceiver]:
    """The operator's event channel, which runs post their events to."""
    receiver = EventReceiver(tmp_path / "events" / "events.sock")
    await receiver.start()
    yield receiver
    await receiver.stop()


@pytest.fixture
def module_interpreter(tmp_path: Path) -> Iterator[Path]:
    """A warm module interpreter (runner/module_server.py) of the test's own:
    the socket it listens on."""
    socket_path = tmp_path / "modules.sock"
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "ansible_operator.runner.module_server", str(socket_path)],
        stdout=subprocess.PIPE,
    )
    assert server.stdout is not None
    assert server.stdout.readline().strip() == b"ready"
    yield socket_path
    server.kill()
    server.wait()
