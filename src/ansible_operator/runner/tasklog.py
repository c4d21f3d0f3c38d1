"""Runner events -> operator log lines (`--ansible-log-events`).

tasks: one line per task start and per failed task (with its path and
message); everything: every event, with its result; nothing: none. Failed
tasks are logged by message only, never by their arguments.

With `ANSIBLE_DEBUG_LOGS=true` (as the reference) Ansible's own output is
logged too, event by event. Everything logged goes through the run's
Redactor (redaction.py): values read from Secrets or given to no_log tasks
never reach the log, and of a no_log task only its hidden result is shown.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from ansible_operator.runner.events import failed_task
from ansible_operator.runner.redaction import SENSITIVE_EVENT, Redactor

log = logging.getLogger("ansible_operator.runner")
MAX_RESULT = 2000


class TaskLogger:
    def __init__(
        self,
        mode: str,
        object_fields: str,
        ansible_output: bool = False,
        redactor: Redactor | None = None,
    ) -> None:
        self.mode = mode
        self.fields = object_fields
        self.ansible_output = ansible_output
        # A redactor of its own learns here; a shared one is taught by RunSummary.
        self._learns = redactor is None
        self.redactor = redactor if redactor is not None else Redactor()

    def handle(self, event: Mapping[str, Any]) -> None:
        if self._learns:
            self.redactor.learn(event)
        if event.get("event") == SENSITIVE_EVENT:
            return
        if self.ansible_output:
            self._log_output(event)
        if self.mode == "nothing":
            return
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind in ("runner_on_failed", "runner_on_unreachable"):
            failed = failed_task(data)
            ignored = " (ignored)" if data.get("ignore_errors") else ""
            log.error(
                "task failed%s %s task=%r path=%s message=%r",
                ignored,
                self.fields,
                failed.task,
                failed.path,
                self.redactor.text(failed.message),
            )
        elif kind == "playbook_on_task_start":
            log.info(
                "task %s task=%r path=%s",
                self.fields,
                data.get("task", ""),
                data.get("task_path", ""),
            )
        elif self.mode == "everything" and kind:
            result = data.get("res")
            text = (
                json.dumps(self.redactor.value(result), default=str)[:MAX_RESULT]
                if result is not None
                else ""
            )
            log.info(
                "event %s event=%s task=%r result=%s", self.fields, kind, data.get("task", ""), text
            )

    def _log_output(self, event: Mapping[str, Any]) -> None:
        text = self.redactor.stdout(event)
        if text:
            log.info("ansible output %s\n%s", self.fields, text)
