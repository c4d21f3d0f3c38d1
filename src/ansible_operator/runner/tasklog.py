"""Runner events -> operator log lines (`--ansible-log-events`).

tasks: one line per task start and per failed task (with its path and
message); everything: every event, with its result; nothing: none. Results of
`no_log` tasks are already censored by Ansible before they reach us, and
failed tasks are logged by message only, never by their arguments.

With `ANSIBLE_DEBUG_LOGS=true` (as the reference) Ansible's own output is
logged too, event by event; an event whose result holds a Secret is logged as
its redacted result instead, since Ansible prints results verbatim.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from ansible_operator.runner.events import failed_task

log = logging.getLogger("ansible_operator.runner")
MAX_RESULT = 2000


class TaskLogger:
    def __init__(self, mode: str, object_fields: str, ansible_output: bool = False) -> None:
        self.mode = mode
        self.fields = object_fields
        self.ansible_output = ansible_output

    def handle(self, event: Mapping[str, Any]) -> None:
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
                failed.message,
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
                json.dumps(redact_secrets(result), default=str)[:MAX_RESULT]
                if result is not None
                else ""
            )
            log.info(
                "event %s event=%s task=%r result=%s", self.fields, kind, data.get("task", ""), text
            )

    def _log_output(self, event: Mapping[str, Any]) -> None:
        text = str(event.get("stdout") or "")
        if not text:
            return
        result = (event.get("event_data") or {}).get("res")
        if result is not None:
            redacted = redact_secrets(result)
            if redacted != result:
                text = f"{event.get('event')}: {json.dumps(redacted, default=str)}"
        log.info("ansible output %s\n%s", self.fields, text)


def redact_secrets(value: Any) -> Any:
    """Secret objects in task results (k8s_info of a Secret, say) keep their keys
    but lose their values, so `everything` logging never prints Secret data."""
    if isinstance(value, Mapping):
        if value.get("kind") == "Secret":
            return {
                key: ({name: "<redacted>" for name in item} if isinstance(item, Mapping) else item)
                if key in ("data", "stringData")
                else redact_secrets(item)
                for key, item in value.items()
            }
        return {key: redact_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_secrets(item) for item in value]
    return value
