"""`ansible-operator cluster ... --state-dir DIR`: the flag after the action
parses too, as the commands our messages suggest write it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.cli import build_parser
from ansible_operator.cluster import default_state_dir


@pytest.mark.parametrize(
    "argv",
    [
        ["cluster", "down", "--state-dir", "/tmp/plane"],  # as node.py's message says it
        ["cluster", "--state-dir", "/tmp/plane", "down"],
        ["cluster", "status", "--state-dir", "/tmp/plane"],
        ["cluster", "up", "--state-dir", "/tmp/plane"],
        ["cluster", "down", "--purge", "--state-dir", "/tmp/plane"],
    ],
)
def test_state_dir_is_taken_before_or_after_the_action(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).state_dir == Path("/tmp/plane")


def test_without_it_the_default_state_dir() -> None:
    assert build_parser().parse_args(["cluster", "down"]).state_dir == default_state_dir()
