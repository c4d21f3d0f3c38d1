"""Runner events -> one span per task and host, timed by the events' own clocks.

Pure: `TaskSpans` folds a run's events in one by one (`add`) and gives back
a task's span once its result event arrives: begun when Ansible started the
task on the host (`runner_on_start`, whose time the result repeats as
`start`), ended at the result (`end`). Only what says which task it was and
how it went reaches a span (name, role, module, file:line, host, changed /
failed / skipped, the failure's message): never the task's arguments or
result, which is where no_log hides its values. Every text goes through
`redact` (the run's Redactor) first, and a failure's message is bounded as
the Failure condition's is.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.observability.spans import Attributes, SpanRecord
from ansible_operator.runner.events import bounded, failed_task, short_location

RESULTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}
MAX_SPAN_MESSAGE = 1024  # characters of a failure's message on its span (as an Event's)
UNFINISHED = "the run ended before this task did"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def event_time_ns(value: object) -> int | None:
    """An event's timestamp (ISO 8601, as ansible-runner writes `created`,
    `start` and `end`; UTC when it names no zone) in ns since the epoch."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return (moment - _EPOCH) // datetime.timedelta(microseconds=1) * 1000


def split_location(task_path: str) -> tuple[str, int | None]:
    """Ansible's `FILE:LINE` -> (FILE, LINE); (task_path, None) without a line."""
    file, colon, line = task_path.rpartition(":")
    if colon and line.isdigit():
        return file, int(line)
    return task_path, None


@dataclass
class _Started:
    start_ns: int
    data: Mapping[str, Any]


class TaskSpans:
    """One run's task spans, from its events in their order."""

    def __init__(self, redact: Callable[[str], str] = lambda text: text) -> None:
        self.redact = redact
        self._started: dict[tuple[str, str], _Started] = {}  # (task uuid, host)

    def add(self, event: Mapping[str, Any]) -> SpanRecord | None:
        """The span of the task this event ends, if it ends one."""
        kind = event.get("event")
        data = event.get("event_data")
        if not isinstance(data, Mapping):
            return None
        key = (str(data.get("task_uuid") or ""), str(data.get("host") or ""))
        if kind == "runner_on_start":
            start = event_time_ns(event.get("created"))
            if start is not None:
                self._started[key] = _Started(start, data)
            return None
        status = RESULTS.get(str(kind))
        if status is None:
            return None
        started = self._started.pop(key, None)
        end = event_time_ns(data.get("end")) or event_time_ns(event.get("created"))
        start = event_time_ns(data.get("start")) or (started.start_ns if started else end)
        if start is None or end is None:
            return None
        return self._record(data, status, start, end)

    def unfinished(self, end_ns: int) -> list[SpanRecord]:
        """The tasks started but never ended (the run was stopped, timed out or
        crashed), as failed spans ending at `end_ns`."""
        records = [
            self._record(started.data, "unfinished", started.start_ns, end_ns, error=UNFINISHED)
            for started in self._started.values()
        ]
        self._started.clear()
        return records

    def _record(
        self,
        data: Mapping[str, Any],
        status: str,
        start_ns: int,
        end_ns: int,
        *,
        error: str | None = None,
    ) -> SpanRecord:
        redact = self.redact
        name = redact(str(data.get("task") or ""))
        action = str(data.get("task_action") or data.get("resolved_action") or "")
        task_path = redact(str(data.get("task_path") or ""))
        result = data.get("res")
        result = result if isinstance(result, Mapping) else {}
        failed = status in ("failed", "unreachable")
        ignored = failed and bool(data.get("ignore_errors"))
        attributes: Attributes = {
            "ansible.task.name": name,
            "ansible.task.module": action,
            "ansible.task.host.name": redact(str(data.get("host") or "")),
            "ansible.task.host.status": "ignored" if ignored else status,
            "ansible.task.changed": result.get("changed") is True,
            "ansible.task.failed": failed,
            "ansible.task.skipped": status == "skipped",
        }
        if role := data.get("role"):
            attributes["ansible.task.role"] = redact(str(role))
        if task_path:
            file, line = split_location(task_path)
            attributes["ansible.task.path"] = short_location(task_path)
            attributes["code.file.path"] = file
            if line is not None:
                attributes["code.line.number"] = line
        if failed and not ignored and error is None:
            # The message as the Failure condition has it (a no_log task's is
            # Ansible's "hidden" notice), redacted, then bounded.
            error = bounded(redact(failed_task(data).message), MAX_SPAN_MESSAGE) or status
        return SpanRecord(
            name=name or action or "task",
            start_ns=start_ns,
            end_ns=end_ns,
            attributes=attributes,
            error=error,
        )
