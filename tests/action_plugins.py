"""An operator_sdk.util action as runs use it: one task under a real ansible-playbook whose
module interpreter cannot start, so only an action plugin can answer. Shared by the
tests of admission_response and conversion_response."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible_operator.collections import COLLECTIONS_PATH

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def play(tmp_path: Path, arguments: dict[str, Any], action: str) -> dict[str, Any]:
    """The task's result (JSON), run with an interpreter that cannot start: so a module
    process would fail the task."""
    playbook = tmp_path / "playbook.yml"
    task = {action: arguments, "register": "answer"}
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
