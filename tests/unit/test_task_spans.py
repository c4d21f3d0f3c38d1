"""A run's events -> one span per task and host, as a trace shows the task:
its name, role, module, file:line, host, outcome and the times Ansible itself
stamped; never its arguments or its result, and no value the run's redactor
knows (a Secret's, a no_log task's)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from ansible_operator.runner.events import NO_LOG_MESSAGE
from ansible_operator.runner.redaction import Redactor
from ansible_operator.runner.task_spans import UNFINISHED, TaskSpans, event_time_ns

TASK_FILE = "/opt/ansible/roles/memcached/tasks/main.yml"
T0 = datetime.datetime(2026, 11, 29, 7, 40, 35, 123456, tzinfo=datetime.UTC)


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def ns(seconds: float) -> int:
    return (
        (at(seconds) - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC))
        // (datetime.timedelta(microseconds=1))
        * 1000
    )


def task(name: str, line: int = 4, uuid: str = "t-1", **extra: Any) -> dict[str, Any]:
    return {
        "task": name,
        "task_uuid": uuid,
        "host": "localhost",
        "task_path": f"{TASK_FILE}:{line}",
        "task_action": "kubernetes.core.k8s",
        "role": "memcached",
        **extra,
    }


def started(data: dict[str, Any], seconds: float) -> dict[str, Any]:
    return {"event": "runner_on_start", "created": at(seconds).isoformat(), "event_data": data}


def ended(
    event: str, data: dict[str, Any], start: float, end: float, **extra: Any
) -> dict[str, Any]:
    # As our event plugin sends them: ansible-runner's datetimes through str().
    timing = {"start": str(at(start)), "end": str(at(end)), "duration": end - start}
    return {
        "event": event,
        "created": at(end).isoformat(),
        "event_data": {**data, **timing, **extra},
    }


def test_a_task_is_one_span_timed_by_its_events_with_its_place_and_outcome() -> None:
    spans = TaskSpans()
    data = task("Create the Deployment", line=12)

    assert spans.add(started(data, 1.0)) is None
    span = spans.add(ended("runner_on_ok", data, 1.0, 1.75, res={"changed": True}))

    assert span is not None
    assert span.name == "Create the Deployment"
    assert (span.start_ns, span.end_ns) == (ns(1.0), ns(1.75))
    assert span.error is None
    assert span.attributes == {
        "ansible.task.name": "Create the Deployment",
        "ansible.task.module": "kubernetes.core.k8s",
        "ansible.task.role": "memcached",
        "ansible.task.host.name": "localhost",
        "ansible.task.host.status": "ok",
        "ansible.task.changed": True,
        "ansible.task.failed": False,
        "ansible.task.skipped": False,
        "ansible.task.path": f"{TASK_FILE}:12",
        "code.file.path": TASK_FILE,
        "code.line.number": 12,
    }


@pytest.mark.parametrize(
    ("event", "extra", "status"),
    [
        ("runner_on_skipped", {}, "skipped"),
        ("runner_on_failed", {"res": {"msg": "no such image"}}, "failed"),
        ("runner_on_failed", {"res": {"msg": "x"}, "ignore_errors": True}, "ignored"),
        ("runner_on_unreachable", {"res": {"msg": "ssh: refused"}}, "unreachable"),
    ],
)
def test_each_outcome_says_itself_and_only_real_failures_fail_the_span(
    event: str, extra: dict[str, Any], status: str
) -> None:
    spans = TaskSpans()
    data = task("Pull")
    spans.add(started(data, 0))
    span = spans.add(ended(event, data, 0, 0.5, **extra))

    assert span is not None
    assert span.attributes["ansible.task.host.status"] == status
    assert span.attributes["ansible.task.failed"] is (
        status in ("failed", "ignored", "unreachable")
    )
    assert span.attributes["ansible.task.skipped"] is (status == "skipped")
    assert span.attributes["ansible.task.changed"] is False
    if status in ("failed", "unreachable"):
        assert span.error == extra["res"]["msg"]  # the message, as the Failure condition's
    else:
        assert span.error is None


def test_a_result_without_a_start_event_still_spans_its_own_times() -> None:
    span = TaskSpans().add(ended("runner_on_ok", task("Late"), 2.0, 3.0, res={}))
    assert span is not None and (span.start_ns, span.end_ns) == (ns(2.0), ns(3.0))


def test_two_hosts_of_one_task_are_two_spans() -> None:
    spans = TaskSpans()
    one, two = task("Ping", host="a"), task("Ping", host="b")
    spans.add(started(one, 0))
    spans.add(started(two, 0.1))
    first = spans.add(ended("runner_on_ok", two, 0.1, 0.3, res={}))
    second = spans.add(ended("runner_on_ok", one, 0, 0.4, res={}))
    assert first is not None and second is not None
    assert [
        first.attributes["ansible.task.host.name"],
        second.attributes["ansible.task.host.name"],
    ] == ["b", "a"]
    assert spans.unfinished(ns(9)) == []


def test_a_task_the_run_never_finished_ends_failed_with_the_run() -> None:
    spans = TaskSpans()
    spans.add(started(task("Wait for the rollout"), 5.0))

    [span] = spans.unfinished(ns(65.0))

    assert (span.start_ns, span.end_ns, span.error) == (ns(5.0), ns(65.0), UNFINISHED)
    assert span.attributes["ansible.task.host.status"] == "unfinished"
    assert spans.unfinished(ns(66.0)) == []


def test_other_events_make_no_span() -> None:
    spans = TaskSpans()
    for event in (
        {"event": "playbook_on_task_start", "event_data": task("x")},
        {"event": "verbose", "stdout": "..."},
        {"event": "runner_on_ok"},  # no event_data
        {"event": "runner_on_ok", "event_data": "odd"},
        {"event": "playbook_on_stats", "event_data": {}},
    ):
        assert spans.add(event) is None


def test_a_no_log_task_span_carries_no_hidden_value() -> None:
    """Its result is Ansible's censored one; the values that reached it (and so its
    templated name) are known to the run's redactor, which every text goes through."""
    redactor = Redactor()
    redactor.add("hunter2-password")
    spans = TaskSpans(redact=redactor.text)
    data = task(
        "Log in as hunter2-password",
        task_args="",  # ansible-runner blanks a no_log task's arguments
    )
    spans.add(started(data, 0))
    censored = {"censored": NO_LOG_MESSAGE, "changed": False}
    span = spans.add(ended("runner_on_failed", data, 0, 1, res=censored))

    assert span is not None
    assert span.name == "Log in as <redacted>"
    assert span.error == NO_LOG_MESSAGE
    assert "hunter2" not in repr(span)


def test_a_failure_message_is_redacted_then_bounded() -> None:
    redactor = Redactor()
    redactor.add("s3cr3t-value")
    spans = TaskSpans(redact=redactor.text)
    data = task("Call")
    message = "token s3cr3t-value refused " + "x" * 5000
    span = spans.add(ended("runner_on_failed", data, 0, 1, res={"msg": message}))

    assert span is not None and span.error is not None
    assert span.error.startswith("token <redacted> refused") and span.error.endswith("(cut)")
    assert len(span.error) == 1024


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T07:40:35.123456+00:00", ns(0)),
        ("2026-11-29 07:40:35.123456+00:00", ns(0)),  # str() of a datetime
        ("2026-11-29T07:40:35.123456", ns(0)),  # no zone: UTC
        ("2026-11-29T08:40:35.123456+01:00", ns(0)),
        ("2026-11-29T07:40:35.123456Z", ns(0)),
        ("yesterday", None),
        ("", None),
        (None, None),
        (12, None),
    ],
)
def test_event_times_are_read_as_ansible_runner_writes_them(text: Any, expected: Any) -> None:
    assert event_time_ns(text) == expected
