"""ansible-runner event plugin: POST every runner event to the operator.

Registered under the `ansible_runner.plugins` entry point, so ansible-runner
loads it in every run. It is inert unless the run was started by the operator,
which sets ANSIBLE_OPERATOR_SOCKET (the unix socket of the event receiver) and
ANSIBLE_OPERATOR_RUN_TOKEN (the run's secret, which routes events to it).

This module runs inside the ansible-runner process: stdlib only, and a failure
to deliver an event must never break the Ansible run (the operator notices
missing events: a run without stats is a Failure).

A task may print megabytes: no string of an event (its output, a result's
field) reaches the operator, or the event's file in the artifacts, longer
than MAX_EVENT_STRING; the event says how much output it had
(OUTPUT_SIZE_FIELD), so the operator still counts it against the run's cap.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from typing import Any

SOCKET_ENV = "ANSIBLE_OPERATOR_SOCKET"
TOKEN_ENV = "ANSIBLE_OPERATOR_RUN_TOKEN"
_TIMEOUT = 30.0
MAX_EVENT_STRING = 256 * 1024  # characters
OUTPUT_SIZE_FIELD = "ansible_operator_stdout_size"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = _TIMEOUT) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


_connection: UnixHTTPConnection | None = None
HELD_EVENTS = frozenset({"verbose"})
_held: list[dict[str, Any]] = []  # events not sent yet, in their order


def _post(path: str, payload: dict[str, Any] | list[dict[str, Any]]) -> None:
    global _connection
    socket_path = os.environ.get(SOCKET_ENV)
    token = os.environ.get(TOKEN_ENV)
    if not socket_path or not token:
        return
    body = json.dumps(payload, default=str).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    # One keep-alive connection per runner process; reconnect once if it went stale.
    for _attempt in range(2):
        try:
            if _connection is None:
                _connection = UnixHTTPConnection(socket_path)
            _connection.request("POST", path, body=body, headers=headers)
            response = _connection.getresponse()
            response.read()
            return
        except (OSError, http.client.HTTPException):
            if _connection is not None:
                _connection.close()
            _connection = None


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_EVENT_STRING:
        return f"{value[:MAX_EVENT_STRING]}... [{len(value) - MAX_EVENT_STRING} characters cut]"
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = _cut(item)
    elif isinstance(value, list):
        value[:] = [_cut(item) for item in value]
    return value


def event_handler(runner_config: Any, data: dict[str, Any]) -> None:
    stdout = data.get("stdout")
    if isinstance(stdout, str) and len(stdout) > MAX_EVENT_STRING:
        data[OUTPUT_SIZE_FIELD] = len(stdout)
    _cut(data)  # in place: ansible-runner writes the event's file after us
    # Verbose lines (a dozen before the first task at the default verbosity)
    # tell nothing about a task's progress: they go with the next event, in
    # one request instead of one each.
    _held.append(data)
    if data.get("event") not in HELD_EVENTS:
        _flush()


def status_handler(runner_config: Any, data: dict[str, Any]) -> None:
    _flush()
    # The "starting" status carries the whole environment, run token included: send only the status.
    _post("/status", {"status": data.get("status"), "runner_ident": data.get("runner_ident")})


def _flush() -> None:
    if _held:
        _post("/events", _held[0] if len(_held) == 1 else list(_held))
        _held.clear()
