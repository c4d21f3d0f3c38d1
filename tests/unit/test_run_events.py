"""What a run achieved, from its runner events."""

from __future__ import annotations

from typing import Any

from ansible_operator.runner.events import NO_LOG_MESSAGE, RunSummary
from ansible_operator.runner.redaction import Redactor
from ansible_operator.runner.tasklog import TaskLogger


def event(kind: str, **data: Any) -> dict[str, Any]:
    return {"event": kind, "event_data": data}


def stats(failures: int = 0, rescued: int = 0, ok: int = 3) -> dict[str, Any]:
    return event(
        "playbook_on_stats",
        ok={"localhost": ok},
        changed={"localhost": 1},
        failures={"localhost": failures} if failures else {},
        rescued={"localhost": rescued} if rescued else {},
        skipped={},
        dark={},
    )


def test_stats_are_summed_and_success_has_no_failure_message() -> None:
    summary = RunSummary()
    summary.add(event("playbook_on_task_start", task="create"))
    summary.add(stats())
    assert summary.stats is not None
    assert (summary.stats.ok, summary.stats.changed, summary.stats.failures) == (3, 1, 0)
    assert summary.failure_message == ""


def test_a_rescued_failure_is_not_the_run_failure() -> None:
    summary = RunSummary()
    summary.add(event("runner_on_failed", task="try", task_path="r.yml:3", res={"msg": "rescued"}))
    summary.add(event("runner_on_failed", task="final", task_path="r.yml:9", res={"msg": "real"}))
    summary.add(stats(failures=1, rescued=1))
    assert summary.failure_message == 'task "final" (r.yml:9) failed: real'


def test_ignored_failures_are_not_collected() -> None:
    summary = RunSummary()
    summary.add(event("runner_on_failed", task="meh", ignore_errors=True, res={"msg": "x"}))
    summary.add(stats())
    assert summary.failed_tasks == []


def test_no_log_failure_message_is_the_censored_text() -> None:
    summary = RunSummary()
    summary.add(event("runner_on_failed", task="secret", res={"censored": NO_LOG_MESSAGE}))
    assert summary.failure_message == NO_LOG_MESSAGE


def test_loop_failure_collects_item_messages() -> None:
    summary = RunSummary()
    summary.add(
        event(
            "runner_on_failed",
            task="loop",
            res={
                "results": [{"failed": True, "msg": "item one"}, {"failed": False, "msg": "fine"}]
            },
        )
    )
    assert summary.failure_message == "item one"


def test_requeue_after_period_is_read_from_the_task_result() -> None:
    summary = RunSummary()
    summary.add(
        event("runner_on_ok", task_action="operator_sdk.util.requeue_after", res={"period": "15s"})
    )
    assert summary.requeue_after == 15
    other = RunSummary()
    other.add(event("runner_on_ok", task_action="debug", res={"period": "15s"}))
    other.add(
        event(
            "runner_on_ok", task_action="community.kubernetes.requeue_after", res={"period": "9s"}
        )
    )
    assert other.requeue_after is None


def test_the_first_requeue_after_wins_as_in_the_go_operator() -> None:
    summary = RunSummary()
    summary.add(event("runner_on_ok", task_action="requeue_after", res={"period": "1m"}))
    summary.add(
        event("runner_on_ok", task_action="operator_sdk.util.requeue_after", res={"period": "5s"})
    )
    assert summary.requeue_after == 60


def test_a_requeue_after_in_a_loop_is_read_from_its_first_item() -> None:
    summary = RunSummary()
    action = "operator_sdk.util.requeue_after"
    summary.add(event("runner_item_on_ok", task_action=action, res={"period": "2m", "item": 1}))
    summary.add(event("runner_item_on_ok", task_action=action, res={"period": "3m", "item": 2}))
    summary.add(event("runner_on_ok", task_action=action, res={"results": [{}, {}]}))
    assert summary.requeue_after == 120


def test_requeue_after_results_without_a_valid_period_are_passed_over() -> None:
    # A failed task has no period (the Go operator panics on it); a module of
    # that name other than ours may return a period that is no duration (the
    # Go operator fails the reconcile). Neither decides the requeue.
    summary = RunSummary()
    action = "operator_sdk.util.requeue_after"
    summary.add(event("runner_on_failed", task_action=action, res={"msg": "invalid time input"}))
    summary.add(event("runner_on_ok", task_action=action, res={"period": "soonish"}))
    summary.add(event("runner_on_ok", task_action=action, res={}))
    assert summary.requeue_after is None
    summary.add(event("runner_on_ok", task_action=action, res={"period": "30"}))
    assert summary.requeue_after == 30


def test_secret_data_is_redacted_from_logged_results() -> None:
    # Secret objects in task results (k8s_info of a Secret, say) keep their keys
    # but lose their values, so `everything` logging never prints Secret data.
    result = {
        "resources": [
            {"kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "c2VjcmV0"}},
            {"kind": "ConfigMap", "data": {"k": "visible"}},
        ]
    }
    redacted = Redactor().value(result)
    assert redacted["resources"][0]["data"] == {"password": "<redacted>"}
    assert redacted["resources"][0]["metadata"] == {"name": "s"}
    assert redacted["resources"][1]["data"] == {"k": "visible"}
    assert "c2VjcmV0" not in str(redacted)


def test_debug_logs_show_ansible_output_but_not_secret_data(caplog: Any) -> None:
    logger = TaskLogger("nothing", "kind=Memcached", ansible_output=True)
    with caplog.at_level("INFO", logger="ansible_operator.runner"):
        logger.handle(
            {
                "event": "runner_on_ok",
                "stdout": "ok: [localhost] => plain",
                "event_data": {"res": {"x": 1}},
            }
        )
        logger.handle(
            {
                "event": "runner_on_ok",
                "stdout": 'ok: [localhost] => {"data": {"password": "c2VjcmV0"}}',
                "event_data": {"res": {"kind": "Secret", "data": {"password": "c2VjcmV0"}}},
            }
        )
    assert "ok: [localhost] => plain" in caplog.text
    assert "c2VjcmV0" not in caplog.text
    assert '"password": "<redacted>"' in caplog.text
