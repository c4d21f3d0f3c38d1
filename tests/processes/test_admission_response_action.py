"""`operator_sdk.util.admission_response` as runs use it: the collection's action plugin,
under a real ansible-playbook (no module process; nothing of a cluster needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible_operator.collections import COLLECTIONS_PATH

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def play(tmp_path: Path, arguments: dict[str, Any]) -> dict[str, Any]:
    """The task's result (JSON), run with an interpreter that cannot start: so a module
    process would fail the task."""
    playbook = tmp_path / "playbook.yml"
    task = {"operator_sdk.util.admission_response": arguments, "register": "answer"}
    show = {"debug": {"msg": "ANSWER {{ answer | to_json }}"}}
    playbook.write_text(
        json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task, show]}])
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env |= {
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH),
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_NOCOLOR": "true",
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local-tmp"),
    }
    done = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            "ansible_python_interpreter=/nonexistent/python",
            str(playbook),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for line in done.stdout.splitlines():
        if '"msg": "ANSWER ' in line:
            return json.loads(json.loads("{" + line.strip().rstrip(",") + "}")["msg"][7:])
    failed = [line for line in done.stdout.splitlines() if "FAILED" in line or '"msg"' in line]
    return {"failed": True, "output": "\n".join(failed)}


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
