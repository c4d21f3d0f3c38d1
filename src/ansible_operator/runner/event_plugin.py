"""ansible-runner event plugin: POST every runner event to the operator.

Registered under the `ansible_runner.plugins` entry point, so ansible-runner
loads it in every run. It is inert unless the run was started by the operator,
which sets ANSIBLE_OPERATOR_SOCKET (the unix socket of the event receiver) and
ANSIBLE_OPERATOR_RUN_TOKEN (the run's secret, which routes events to it).

This module runs inside the ansible-runner process: stdlib only, and a failure
to deliver an event must never break the Ansible run (the operator notices
missing events: a run without stats is a Failure).
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


def _post(path: str, payload: dict[str, Any]) -> None:
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


def event_handler(runner_config: Any, data: dict[str, Any]) -> None:
    _post("/events", data)


def status_handler(runner_config: Any, data: dict[str, Any]) -> None:
    # The "starting" status carries the whole environment, run token included: send only the status.
    _post("/status", {"status": data.get("status"), "runner_ident": data.get("runner_ident")})
