"""`operator_sdk.util.admission_response` as runs use it: the collection's action plugin,
under a real ansible-playbook (no module process; nothing of a cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from action_plugins import play as play_task


def play(tmp_path: Path, arguments: dict[str, Any]) -> dict[str, Any]:
    return play_task(tmp_path, arguments, "operator_sdk.util.admission_response")


def test_the_answer_comes_from_the_controller_without_a_module_process(tmp_path: Path) -> None:
    result = play(tmp_path, {"allowed": False, "message": "no more than 5", "warnings": ["w"]})
    assert result["admission_response"] == {
        "allowed": False,
        "code": 403,
        "message": "no more than 5",
        "warnings": ["w"],
        "audit_annotations": {},
    }
    assert result["changed"] is False


def test_arguments_are_checked_as_the_module_checks_them(tmp_path: Path) -> None:
    both = play(tmp_path, {"object": {"a": 1}, "patch": []})
    assert both["failed"] and "mutually exclusive: object|patch" in both["output"]
    bad_patch = play(tmp_path, {"patch": [{"op": "merge", "path": "/a"}]})
    assert (
        bad_patch["failed"]
        and "invalid patch: patch[0]: 'op' must be one of" in (bad_patch["output"])
    )
