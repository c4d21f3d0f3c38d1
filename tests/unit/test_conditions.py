"""Condition merging: by type, others kept, transition time moves only with status."""

from __future__ import annotations

from ansible_operator.reconciler import conditions as c

RESULT = c.AnsibleResult(ok=3, changed=1, skipped=0, failures=0, completion="2026-01-01T00:00:00Z")


def test_running_is_added_to_empty_status() -> None:
    merged = c.merge_conditions(None, c.running(), now="T1")
    assert merged == [
        {
            "type": "Running",
            "status": "True",
            "reason": "Running",
            "message": "Running reconciliation",
            "lastTransitionTime": "T1",
        }
    ]


def test_success_ends_running_and_carries_the_ansible_result() -> None:
    merged = c.merge_conditions(
        c.merge_conditions(None, c.running(), now="T1"), c.succeeded(RESULT), now="T2"
    )
    by_type = {entry["type"]: entry for entry in merged}
    assert by_type["Running"]["status"] == "False"
    assert by_type["Running"]["reason"] == "Successful"
    assert by_type["Running"]["message"] == "Awaiting next reconciliation"
    assert by_type["Running"]["ansibleResult"]["changed"] == 1
    assert by_type["Successful"] == {
        "type": "Successful",
        "status": "True",
        "reason": "Successful",
        "message": "Last reconciliation succeeded",
        "lastTransitionTime": "T2",
        "ansibleResult": RESULT.to_dict(),
    }
    assert by_type["Failure"]["status"] == "False"


def test_transition_time_is_kept_while_status_is_unchanged() -> None:
    first = c.merge_conditions(None, c.succeeded(RESULT), now="T1")
    second = c.merge_conditions(first, c.succeeded(RESULT), now="T2")
    assert [e["lastTransitionTime"] for e in second] == ["T1", "T1", "T1"]
    failed = c.merge_conditions(second, c.failed("boom", None), now="T3")
    by_type = {entry["type"]: entry for entry in failed}
    assert by_type["Failure"]["lastTransitionTime"] == "T3"
    assert by_type["Failure"]["message"] == "boom"
    assert by_type["Successful"]["lastTransitionTime"] == "T3"
    assert by_type["Running"]["lastTransitionTime"] == "T1"  # was False, stays False


def test_conditions_written_by_the_role_are_kept_in_place() -> None:
    existing = [
        {
            "type": "DatabaseReady",
            "status": "True",
            "reason": "Up",
            "message": "",
            "lastTransitionTime": "T0",
        }
    ]
    merged = c.merge_conditions(existing, c.running(), now="T1")
    assert merged[0] == existing[0]
    assert merged[1]["type"] == "Running"


def test_is_true_reads_a_condition() -> None:
    status = {"conditions": c.merge_conditions(None, c.failed("x", None), now="T")}
    assert c.is_true(status, "Failure")
    assert not c.is_true(status, "Successful")
    assert not c.is_true(None, "Failure")


def test_running_turns_an_earlier_success_false() -> None:
    done = {"conditions": c.merge_conditions(None, c.succeeded(RESULT), now="T1")}
    merged = c.merge_conditions(done["conditions"], c.running(done), now="T2")
    assert c.is_true({"conditions": merged}, "Running")
    assert not c.is_true({"conditions": merged}, "Successful")
    assert [x["type"] for x in c.merge_conditions(None, c.running(None), now="T")] == ["Running"]
