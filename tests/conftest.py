"""Fixtures shared by every tier of tests, and the tiers' markers.

A test's tier is its directory under tests/ (unit, processes, integration,
security, faults, sharding, node, e2e, packaging), and it carries the marker of that name:
`pytest -m unit` is the fast tier, `pytest -m "not node and not e2e"` leaves
out the slowest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ansible_operator.runner.receiver import EventReceiver

TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(item.path).resolve().relative_to(TESTS).parts[0]
        item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture
async def receiver(tmp_path: Path) -> AsyncIterator[EventReceiver]:
    """The operator's event channel, which runs post their events to."""
    receiver = EventReceiver(tmp_path / "events" / "events.sock")
    await receiver.start()
    yield receiver
    await receiver.stop()
