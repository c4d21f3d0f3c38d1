"""Ansible callback: tell the operator what a `no_log` task must not show.

Loaded by every run (its directory is on ANSIBLE_CALLBACK_PLUGINS and it
needs no enabling). Ansible hides a no_log task's result from callbacks, not
its arguments: the values that reached them through templating (a password
from a variable, a Secret's data) are posted to the operator's event receiver
as one event, so the operator redacts them wherever the run's output leaves
it. Literal text of the task is in the role's source and is not sent. Inert
outside a run of the operator.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ansible.plugins.callback import CallbackBase

from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV, UnixHTTPConnection
from ansible_operator.runner.redaction import SENSITIVE_EVENT, templated_values

DOCUMENTATION = """
name: ansible_operator_no_log
type: aggregate
short_description: reports the templated values of no_log tasks to ansible-operator
description: Sends the values that reached no_log tasks' arguments to the operator.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ansible_operator_no_log"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self) -> None:
        super().__init__()
        self._sent: set[str] = set()

    def _report(self, result: Any) -> None:
        socket_path, token = os.environ.get(SOCKET_ENV), os.environ.get(TOKEN_ENV)
        if not socket_path or not token:
            return
        no_log, templated_args, task = _as_run(result)
        if not no_log:
            return
        values = {str(value) for value in templated_values(_raw_args(task), templated_args)}
        values -= self._sent
        if not values:
            return
        self._sent |= values
        body = json.dumps({"event": SENSITIVE_EVENT, "values": sorted(values)})
        # A connection of its own: a warm run's fork may have inherited another.
        connection = UnixHTTPConnection(socket_path)
        try:
            connection.request(
                "POST",
                "/events",
                body=body,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            )
            connection.getresponse().read()
        except OSError:
            pass  # the run goes on; its artifacts are still censored by Ansible
        finally:
            connection.close()

    v2_runner_on_ok = _report
    v2_runner_on_skipped = _report
    v2_runner_on_unreachable = _report
    v2_runner_item_on_ok = _report
    v2_runner_item_on_failed = _report

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._report(result)


def _as_run(result: Any) -> tuple[Any, Any, Any]:
    """(no_log, args, task) as the worker templated them.

    From 2.19 the result's `task` carries the worker's attributes. Not its
    `task_fields`: each read of it is a deprecation that walks the whole stack
    reading source files, ~50 ms per task. Before 2.19 only `_task_fields` has
    them, and `_task` is the task as written."""
    task = getattr(result, "task", None)
    if task is not None:
        return task.no_log, task.args, task
    fields = result._task_fields
    return fields.get("no_log"), fields.get("args"), result._task


def _raw_args(task: Any) -> Any:
    """The task's arguments as written (templates unrendered): the value of
    its action key (or `args:`), a `key=value` string parsed."""
    source = task.get_ds() if hasattr(task, "get_ds") else None
    if not isinstance(source, Mapping):
        return None
    keywords = set(getattr(task, "fattributes", ()) or ())
    raw: dict[str, Any] = {}
    for key, value in source.items():
        if key == "args" and isinstance(value, Mapping):
            raw.update(value)
        elif key not in keywords or key in ("action", "local_action"):
            raw.update(_as_mapping(value))
    return raw or None


def _as_mapping(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        from ansible.parsing.splitter import parse_kv

        try:
            return parse_kv(value, check_raw=True)
        except Exception:
            return {"_raw_params": value}
    return {}
