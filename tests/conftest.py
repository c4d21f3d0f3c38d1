"""Fixtures shared by every tier of tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
