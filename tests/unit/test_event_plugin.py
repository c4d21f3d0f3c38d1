"""The event plugin sends verbose lines with the next event, the rest at once."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.runner import event_plugin


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    requests: list[tuple[str, Any]] = []
    monkeypatch.setattr(event_plugin, "_post", lambda path, body: requests.append((path, body)))
    monkeypatch.setattr(event_plugin, "_held", [])
    return requests


def test_verbose_lines_wait_for_the_next_event_and_go_with_it(sent: list) -> None:
    event_plugin.event_handler(None, {"event": "verbose", "stdout": "ansible-playbook"})
    event_plugin.event_handler(None, {"event": "verbose", "stdout": "config file = None"})
    assert sent == []
    event_plugin.event_handler(None, {"event": "playbook_on_start"})
    assert sent == [
        (
            "/events",
            [
                {"event": "verbose", "stdout": "ansible-playbook"},
                {"event": "verbose", "stdout": "config file = None"},
                {"event": "playbook_on_start"},
            ],
        )
    ]


def test_a_task_event_goes_at_once_alone(sent: list) -> None:
    event_plugin.event_handler(None, {"event": "playbook_on_task_start", "task": "t"})
    assert sent == [("/events", {"event": "playbook_on_task_start", "task": "t"})]


def test_verbose_lines_of_a_run_that_ends_without_another_event_go_before_its_status(
    sent: list,
) -> None:
    event_plugin.event_handler(None, {"event": "verbose", "stdout": "ERROR! no such role"})
    event_plugin.status_handler(None, {"status": "failed", "runner_ident": "1", "env": {"X": "1"}})
    assert sent == [
        ("/events", {"event": "verbose", "stdout": "ERROR! no such role"}),
        ("/status", {"status": "failed", "runner_ident": "1"}),
    ]
