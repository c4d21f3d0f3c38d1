"""runner/terminal.py's EventMarks: ansible-runner's event marks taken out of
Ansible's output however it arrives in pieces, Ansible's own escapes kept."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_operator.runner.terminal import EventMarks


def mark(data: dict, width: int = 78) -> str:
    """As ansible-runner's display callback writes an event (its `dump`)."""
    encoded = base64.b64encode(json.dumps(data).encode()).decode()
    chunks = [encoded[at : at + width] for at in range(0, len(encoded), width)]
    return "\x1b[K" + "".join(f"{chunk}\x1b[{len(chunk)}D" for chunk in chunks) + "\x1b[K"


OUTPUT = (
    mark({"uuid": "a" * 36})
    + "\r\nTASK [greeting : Fail] ****\r\n"
    + mark({"event": "playbook_on_task_start", "stdout": "x" * 200})
    + "\x1b[0;31mfatal: [localhost]: FAILED!\x1b[0m\r\n"
    + mark({"uuid": "b" * 36})
    + "[localhost] TASK: greeting : Fail (debug)> "
)
SHOWN = (
    "\r\nTASK [greeting : Fail] ****\r\n"
    "\x1b[0;31mfatal: [localhost]: FAILED!\x1b[0m\r\n"
    "[localhost] TASK: greeting : Fail (debug)> "
)


def test_marks_are_taken_out_and_ansibles_colours_kept() -> None:
    marks = EventMarks()
    assert marks.shown(OUTPUT) + marks.rest() == SHOWN


@pytest.mark.parametrize("cut", range(1, len(OUTPUT)))
def test_output_cut_anywhere_shows_the_same(cut: int) -> None:
    marks = EventMarks()
    shown = marks.shown(OUTPUT[:cut]) + marks.shown(OUTPUT[cut:]) + marks.rest()
    assert shown == SHOWN


def test_a_piece_ending_in_a_mark_holds_it_and_shows_what_came_before() -> None:
    marks = EventMarks()
    whole = mark({"uuid": "c" * 36})
    assert marks.shown("before" + whole[:20]) == "before"
    assert marks.shown(whole[20:] + "after") == "after"


def test_an_escape_that_is_no_mark_is_shown_when_the_output_ends() -> None:
    marks = EventMarks()
    assert marks.shown("text\x1b[K") == "text"  # a mark begins so: held
    assert marks.shown(" plain") == "\x1b[K plain"
    assert marks.shown("end\x1b[") == "end"
    assert marks.rest() == "\x1b["
