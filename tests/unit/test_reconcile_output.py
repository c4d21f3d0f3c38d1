"""What `reconcile --check` shows of a task's diff (commands/reconcile_output.py):
the change the run would make, without the API server's bookkeeping, and a
Secret's changed keys without their values."""

from __future__ import annotations

from typing import Any

from ansible_operator.commands.reconcile_output import PreviewOutput, diff_text
from ansible_operator.runner.redaction import Redactor

MANAGED = [{"manager": "kubectl", "operation": "Update", "time": "2026-05-01T10:00:00Z"}]


def side(data: dict[str, str], **metadata: Any) -> dict[str, Any]:
    return {"data": data, "metadata": metadata} if metadata else {"data": data}


def test_only_what_the_role_changes_is_shown() -> None:
    before = side({"message": "hi"}, managedFields=MANAGED, resourceVersion="7")
    after = side(
        {"message": "bonjour"},
        managedFields=[dict(MANAGED[0], time="2026-05-01T10:00:09Z")],
        resourceVersion="8",
    )
    assert diff_text({"before": before, "after": after}, "ConfigMap") == (
        "--- before\n+++ after\n@@ -1,2 +1,2 @@\n data:\n-  message: hi\n+  message: bonjour"
    )


def test_a_diff_of_bookkeeping_alone_shows_nothing() -> None:
    before = {"metadata": {"managedFields": MANAGED, "resourceVersion": "7", "generation": 1}}
    after = {"metadata": {"managedFields": [], "resourceVersion": "8", "generation": 2}}
    assert diff_text({"before": before, "after": after}, "Deployment") == ""


def test_a_secrets_changed_keys_show_without_their_values() -> None:
    before = side({"password": "aHVudGVyMg=="})
    after = side({"password": "c3dvcmRmaXNo", "user": "YWRtaW4="})
    shown = diff_text({"before": before, "after": after}, "Secret")
    assert "aHVudGVyMg" not in shown and "c3dvcmRmaXNo" not in shown and "YWRtaW4" not in shown
    assert "-  password: '<secret value: not shown>'" in shown
    assert "+  password: '<secret value: not shown, changed>'" in shown
    assert "+  user: '<secret value: not shown, changed>'" in shown


def test_the_diff_event_is_held_until_its_tasks_result_says_the_kind() -> None:
    output = PreviewOutput()
    diff = {"before": side({"password": "aHVudGVyMg=="}), "after": side({"password": "eA=="})}
    held = output(
        {
            "event": "runner_on_file_diff",
            "stdout": "--- before\n+++ after\n-  password: aHVudGVyMg==",
            "event_data": {"task_uuid": "t1", "diff": diff},
        },
        Redactor(),
    )
    shown = output(
        {
            "event": "runner_on_ok",
            "stdout": "\x1b[0;33mchanged: [localhost]\x1b[0m",
            "event_data": {
                "task_uuid": "t1",
                "res": {"changed": True, "diff": diff, "result": {"kind": "Secret"}},
            },
        },
        Redactor(),
    )
    assert held == ""
    assert "aHVudGVyMg" not in shown
    assert "+  password: '<secret value: not shown, changed>'" in shown
    assert shown.endswith("changed: [localhost]\x1b[0m")
