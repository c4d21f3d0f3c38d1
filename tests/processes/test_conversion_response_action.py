"""`operator_sdk.util.conversion_response` as runs use it: the collection's action plugin,
under a real ansible-playbook (no module process; nothing of a cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from action_plugins import play

ACTION = "operator_sdk.util.conversion_response"


def test_the_objects_come_from_the_controller_without_a_module_process(tmp_path: Path) -> None:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "example.com/v2", "kind": "W", "metadata": {"name": "a"}}
    ]
    result = play(tmp_path, {"objects": objects}, ACTION)
    assert result["conversion_response"] == {"objects": objects}
    assert result["changed"] is False


def test_what_is_no_object_is_refused_naming_it(tmp_path: Path) -> None:
    result = play(tmp_path, {"objects": [{"kind": "W"}]}, ACTION)
    assert result["failed"]
    assert (
        "objects[0] is no Kubernetes object (it needs apiVersion and metadata)"
        in (result["output"])
    )
