"""The shipped operator_sdk.util collection, run through the real ansible-playbook."""

from __future__ import annotations

import importlib.util
import json
import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ansible_operator.collections import COLLECTIONS_PATH

MODULES = COLLECTIONS_PATH / "ansible_collections" / "operator_sdk" / "util" / "plugins" / "modules"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def run_playbook(
    tmp_path: Path, tasks: str, env: dict[str, str] | None = None, header: str = ""
) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(f"- hosts: localhost\n  gather_facts: false\n{header}  tasks:\n" + tasks)
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "K8S_AUTH_"))
    }
    environment.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH),
            "ANSIBLE_GATHERING": "explicit",
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
            "ANSIBLE_NOCOLOR": "true",
            "ANSIBLE_RETRY_FILES_ENABLED": "false",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local-tmp"),
            "ANSIBLE_REMOTE_TEMP": str(tmp_path / "remote-tmp"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        }
    )
    environment.update(env or {})
    return subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            str(playbook),
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_collections_path_holds_the_collection() -> None:
    root = COLLECTIONS_PATH / "ansible_collections" / "operator_sdk" / "util"
    assert (root / "galaxy.yml").is_file()
    assert (root / "meta" / "runtime.yml").is_file()
    names = {path.stem for path in MODULES.glob("*.py")}
    assert {"k8s_status", "requeue_after", "k8s_event", "osdk_metric"} <= names


def test_requeue_after_returns_period(tmp_path: Path) -> None:
    tasks = """
    - operator_sdk.util.requeue_after:
        time: 1m30s
      register: full
    - requeue_after:
        time: "45"
      register: bare
    - assert:
        that:
          - full.period == "1m30s"
          - full.requeue_after_seconds == 90.0
          - not full.changed
          - bare.period == "45s"
          - bare.requeue_after_seconds == 45.0
"""
    result = run_playbook(tmp_path, tasks, header="  collections:\n    - operator_sdk.util\n")
    assert result.returncode == 0, result.stdout + result.stderr


def test_requeue_after_rejects_bad_time(tmp_path: Path) -> None:
    tasks = """
    - operator_sdk.util.requeue_after:
        time: soonish
"""
    result = run_playbook(tmp_path, tasks)
    assert result.returncode != 0
    assert "soonish" in result.stdout
    assert "requeue_after: invalid time" in result.stdout


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def metrics_server(tmp_path: Path) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    socket_path = tmp_path / "operator.sock"

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body["_path"] = self.path
            body["_auth"] = self.headers.get("Authorization")
            received.append(body)
            if body.get("name") == "rejected":
                answer = b"metric rejected: bad type\n"
                self.send_response(400)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                return
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def address_string(self) -> str:
            return "unix"

    server = _Server(str(socket_path), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield socket_path, received
    finally:
        server.shutdown()
        server.server_close()


def test_osdk_metric_posts_to_the_operator(
    tmp_path: Path, metrics_server: tuple[Path, list[dict[str, Any]]]
) -> None:
    socket_path, received = metrics_server
    tasks = """
    - operator_sdk.util.osdk_metric:
        name: my_counter
        description: Things counted
        counter:
          increment: true
    - operator_sdk.util.osdk_metric:
        name: my_gauge
        gauge:
          set: 7
    - operator_sdk.util.osdk_metric:
        name: my_histogram
        histogram:
          observe: 0.25
    - operator_sdk.util.osdk_metric:
        name: rejected
        summary:
          observe: 1
      register: rejected
      ignore_errors: true
    - assert:
        that:
          - rejected is failed
          - "'metric rejected: bad type' in rejected.msg"
"""
    env = {"ANSIBLE_OPERATOR_SOCKET": str(socket_path), "ANSIBLE_OPERATOR_RUN_TOKEN": "tok"}
    result = run_playbook(tmp_path, tasks, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert received == [
        {
            "name": "my_counter",
            "description": "Things counted",
            "type": "counter",
            "operation": "increment",
            "value": 1.0,
            "_path": "/metrics",
            "_auth": "Bearer tok",
        },
        {
            "name": "my_gauge",
            "description": "",
            "type": "gauge",
            "operation": "set",
            "value": 7.0,
            "_path": "/metrics",
            "_auth": "Bearer tok",
        },
        {
            "name": "my_histogram",
            "description": "",
            "type": "histogram",
            "operation": "observe",
            "value": 0.25,
            "_path": "/metrics",
            "_auth": "Bearer tok",
        },
        {
            "name": "rejected",
            "description": "",
            "type": "summary",
            "operation": "observe",
            "value": 1.0,
            "_path": "/metrics",
            "_auth": "Bearer tok",
        },
    ]


def test_osdk_metric_needs_the_runtime(tmp_path: Path) -> None:
    tasks = """
    - operator_sdk.util.osdk_metric:
        name: my_counter
        counter:
          increment: true
"""
    result = run_playbook(tmp_path, tasks)
    assert result.returncode != 0
    assert "osdk_metric needs the ansible-operator runtime" in result.stdout


# ----- k8s_status's merge logic, without a cluster ---------------------------------


def load_module(name: str) -> ModuleType:
    # As Ansible does: the collection's module_utils import from the
    # `ansible_collections` namespace, which COLLECTIONS_PATH extends.
    if str(COLLECTIONS_PATH) not in sys.path:
        sys.path.append(str(COLLECTIONS_PATH))
    spec = importlib.util.spec_from_file_location(f"_osdk_{name}", MODULES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def k8s_status() -> ModuleType:
    return load_module("k8s_status")


def status_params(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "status": None,
        "conditions": None,
        "replace_lists": False,
        "force": False,
    }
    values.update(overrides)
    return values


def test_k8s_status_merges_status_and_conditions(k8s_status: ModuleType) -> None:
    current = {
        "nodes": ["a"],
        "info": {"x": 1, "y": 2},
        "conditions": [
            {"type": "Running", "status": "True", "lastTransitionTime": "T0"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "T0"},
        ],
    }
    new = k8s_status.desired_status(
        current,
        status_params(
            status={"nodes": ["b"], "info": {"y": 3}},
            conditions=[
                {"type": "Running", "status": "True", "reason": "Again"},
                {"type": "Ready", "status": True},
                {"type": "Backup", "status": "Unknown"},
            ],
        ),
        "T1",
    )
    assert new == {
        "nodes": ["b"],
        "info": {"x": 1, "y": 3},
        "conditions": [
            {"type": "Running", "status": "True", "reason": "Again", "lastTransitionTime": "T0"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "T1"},
            {"type": "Backup", "status": "Unknown", "lastTransitionTime": "T1"},
        ],
    }
    # Nothing new: nothing differs, so the module reports no change.
    same = k8s_status.desired_status(
        new, status_params(conditions=[{"type": "Ready", "status": "True"}]), "T2"
    )
    assert same == new


def test_k8s_status_force_replaces(k8s_status: ModuleType) -> None:
    current = {
        "old": 1,
        "conditions": [
            {"type": "Running", "status": "True", "lastTransitionTime": "T0"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "T0"},
        ],
    }
    new = k8s_status.desired_status(
        current,
        status_params(
            force=True, status={"fresh": 2}, conditions=[{"type": "Ready", "status": "True"}]
        ),
        "T1",
    )
    assert new == {
        "fresh": 2,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "T0"}],
    }


def test_k8s_status_rejects_bad_condition_status(k8s_status: ModuleType) -> None:
    with pytest.raises(ValueError, match="True, False or Unknown"):
        k8s_status.normalise_conditions([{"type": "Ready", "status": "yes"}])
    with pytest.raises(ValueError, match="needs a 'type'"):
        k8s_status.normalise_conditions([{"status": "True"}])
