"""The shipped operator_sdk.util collection, run through the real ansible-playbook
as a role runs it: against a fake API server, a fake metrics receiver, or the
operator's own event receiver. Behaviour follows the original collection
(operator-sdk-ansible-util v0.5.0) and the Go operator's side of osdk_metric."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ansible_operator.collections import COLLECTIONS_PATH
from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner.receiver import EventReceiver
from fake_kube_api import FakeKubeAPI, serve

COLLECTION = COLLECTIONS_PATH / "ansible_collections" / "operator_sdk" / "util"
MODULES = COLLECTION / "plugins" / "modules"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PYTHON_3_9 = Path("/root/.pyenv/versions/3.9.18/bin/python")


def playbook_command(
    tmp_path: Path,
    tasks: str,
    env: dict[str, str] | None = None,
    header: str = "",
    python: str = sys.executable,
) -> tuple[list[str], dict[str, str]]:
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(f"- hosts: localhost\n  gather_facts: false\n{header}  tasks:\n" + tasks)
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "K8S_AUTH_")) and key != "KUBECONFIG"
    }
    environment.update(
        {
            "HOME": str(tmp_path / "home"),  # no ~/.kube/config of the machine
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
    command = [
        str(ANSIBLE_PLAYBOOK),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={python}",
        str(playbook),
    ]
    return command, environment


def run_playbook(
    tmp_path: Path,
    tasks: str,
    env: dict[str, str] | None = None,
    header: str = "",
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    command, environment = playbook_command(tmp_path, tasks, env, header, python)
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=180)


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr


def test_collections_path_holds_the_collection() -> None:
    assert (COLLECTION / "galaxy.yml").is_file()
    assert (COLLECTION / "meta" / "runtime.yml").is_file()
    names = {path.stem for path in MODULES.glob("*.py")}
    assert {"k8s_status", "requeue_after", "k8s_event", "osdk_metric"} <= names


# ----- requeue_after --------------------------------------------------------------


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
    assert_ok(run_playbook(tmp_path, tasks, header="  collections:\n    - operator_sdk.util\n"))


def test_requeue_after_rejects_bad_time_with_the_originals_message(tmp_path: Path) -> None:
    tasks = """
    - operator_sdk.util.requeue_after:
        time: soonish
"""
    result = run_playbook(tmp_path, tasks)
    assert result.returncode != 0
    assert "invalid time input: 'soonish' is not a duration" in result.stdout


# ----- osdk_metric ----------------------------------------------------------------


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _recording_handler(received: list[dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body["_path"] = self.path
            body["_auth"] = self.headers.get("Authorization")
            received.append(body)
            status, answer = 200, b""
            if body.get("name") == "rejected":
                status, answer = 400, b"counter metrics cannot decrease in value\n"
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def address_string(self) -> str:
            return "test"

    return Handler


@pytest.fixture
def operator_socket(tmp_path: Path) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """A stand-in for the operator's receiver on its unix socket."""
    received: list[dict[str, Any]] = []
    socket_path = tmp_path / "operator.sock"
    server = _UnixServer(str(socket_path), _recording_handler(received))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield socket_path, received
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def metrics_address() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A stand-in for the Go operator's receiver on TCP (what `address` names)."""
    received: list[dict[str, Any]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _recording_handler(received))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", received
    finally:
        server.shutdown()
        server.server_close()


def test_osdk_metric_sends_the_originals_payload_to_the_operator(
    tmp_path: Path, operator_socket: tuple[Path, list[dict[str, Any]]]
) -> None:
    socket_path, received = operator_socket
    tasks = """
    - operator_sdk.util.osdk_metric:
        name: my_counter
        description: Things counted
        counter: {}
    - operator_sdk.util.osdk_metric:
        name: my_gauge
        description: A level
        gauge:
          add: 0
          set: 7
    - operator_sdk.util.osdk_metric:
        name: my_histogram
        description: Durations
        histogram: {}
      register: sent
    - operator_sdk.util.osdk_metric:
        name: rejected
        description: Refused
        counter:
          add: -1
      register: rejected
      ignore_errors: true
    - assert:
        that:
          - sent is changed
          - rejected is failed
          - rejected.msg == 'counter metrics cannot decrease in value\\n'
          - rejected.status_code == 400
"""
    env = {"ANSIBLE_OPERATOR_SOCKET": str(socket_path), "ANSIBLE_OPERATOR_RUN_TOKEN": "tok"}
    assert_ok(run_playbook(tmp_path, tasks, env))
    route = {"_path": "/metrics", "_auth": "Bearer tok"}
    assert received == [
        {
            "name": "my_counter",
            "description": "Things counted",
            "counter": {"increment": None, "add": None},
            **route,
        },
        {
            "name": "my_gauge",
            "description": "A level",
            "gauge": {
                "set": 7.0,
                "increment": None,
                "decrement": None,
                "add": 0.0,
                "subtract": None,
                "set_to_current_time": None,
            },
            **route,
        },
        {
            "name": "my_histogram",
            "description": "Durations",
            "histogram": {"observe": None},
            **route,
        },
        {
            "name": "rejected",
            "description": "Refused",
            "counter": {"increment": None, "add": -1.0},
            **route,
        },
    ]


def test_osdk_metric_posts_to_address_like_the_original(
    tmp_path: Path,
    operator_socket: tuple[Path, list[dict[str, Any]]],
    metrics_address: tuple[str, list[dict[str, Any]]],
) -> None:
    socket_path, to_operator = operator_socket
    address, to_address = metrics_address
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    tasks = f"""
    - operator_sdk.util.osdk_metric:
        name: elsewhere
        description: Sent where the task says
        address: {address}
        summary:
          observe: 1.5
    - operator_sdk.util.osdk_metric:
        name: rejected
        description: Refused
        address: {address}
        gauge:
          inc: true
      register: rejected
      ignore_errors: true
    - operator_sdk.util.osdk_metric:
        name: lost
        description: Nobody listens
        address: http://127.0.0.1:{closed_port}/metrics
        counter:
          increment: true
      register: lost
      ignore_errors: true
    - assert:
        that:
          - rejected.status_code == 400
          - "'cannot reach http://127.0.0.1:{closed_port}/metrics' in lost.msg"
"""
    # Inside an operator run too: an address of the task's own wins.
    env = {"ANSIBLE_OPERATOR_SOCKET": str(socket_path), "ANSIBLE_OPERATOR_RUN_TOKEN": "tok"}
    assert_ok(run_playbook(tmp_path, tasks, env))
    assert to_operator == []
    assert [(m["name"], m["_path"], m["_auth"]) for m in to_address] == [
        ("elsewhere", "/metrics", None),
        ("rejected", "/metrics", None),
    ]
    assert to_address[0]["summary"] == {"observe": 1.5}
    assert to_address[1]["gauge"]["increment"] is True


def test_osdk_metric_outside_an_operator_run_says_what_it_could_not_reach(
    tmp_path: Path,
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    tasks = f"""
    - operator_sdk.util.osdk_metric:
        name: my_counter
        description: Things counted
        address: http://127.0.0.1:{port}/metrics
        counter:
          increment: true
"""
    result = run_playbook(tmp_path, tasks)
    assert result.returncode != 0
    assert "not in an ansible-operator run: ANSIBLE_OPERATOR_SOCKET is unset" in result.stdout


async def test_osdk_metric_reaches_the_operators_metrics_as_go_exposes_them(
    tmp_path: Path,
) -> None:
    """The module, the operator's receiver and its metrics, end to end."""
    metrics = Metrics()
    receiver = EventReceiver(tmp_path / "sock" / "events.sock", on_metric=metrics.user_metric)
    await receiver.start()
    channel = receiver.open_channel(lambda _event: None)
    tasks = """
    - name: counter {} only creates the metric
      operator_sdk.util.osdk_metric: {name: plain_counter, description: Created only, counter: {}}
    - operator_sdk.util.osdk_metric: {name: jobs_total, description: Jobs, counter: {}}
    - operator_sdk.util.osdk_metric:
        name: jobs_total
        description: ignored after creation
        counter: {increment: true, add: 5}
    - operator_sdk.util.osdk_metric: {name: jobs_total, description: Jobs, counter: {add: 2.5}}
    - name: several operations, the first by Go's precedence applies (add 0 does not)
      operator_sdk.util.osdk_metric: {name: level, description: Level, gauge: {add: 0, set: 5}}
    - name: set 0 does nothing
      operator_sdk.util.osdk_metric: {name: level, description: Level, gauge: {set: 0}}
    - operator_sdk.util.osdk_metric:
        name: level
        description: Level
        gauge: {increment: true, set: 9}
    - name: histogram {} observes 0
      operator_sdk.util.osdk_metric: {name: took, description: Took, histogram: {}}
    - name: a summary observes into the histogram of that name
      operator_sdk.util.osdk_metric: {name: took, description: Took, summary: {observe: 0.3}}
    - operator_sdk.util.osdk_metric: {name: jobs_total, description: Jobs, counter: {add: -1}}
      register: negative
      ignore_errors: true
    - operator_sdk.util.osdk_metric: {name: jobs_total, description: Jobs, gauge: {set: 1}}
      register: retyped
      ignore_errors: true
    - operator_sdk.util.osdk_metric:
        name: both
        description: Two at once
        gauge: {set: 1}
        counter: {}
      register: two
      ignore_errors: true
    - assert:
        that:
          - negative.msg == 'counter metrics cannot decrease in value\\n'
          - negative.status_code == 400
          - retyped.msg == 'cannot change metric type of jobs_total, which is a counter\\n'
          - two.msg == 'only one metric can be processed at a time\\n'
"""
    env = {
        "ANSIBLE_OPERATOR_SOCKET": str(receiver.socket_path),
        "ANSIBLE_OPERATOR_RUN_TOKEN": channel.token,
    }
    command, environment = playbook_command(tmp_path, tasks, env)
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            env=environment,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), timeout=180)
    finally:
        await receiver.stop()
    assert process.returncode == 0, output.decode()

    lines = metrics.exposition().decode().splitlines()
    assert "# HELP jobs_total Jobs" in lines
    assert "# TYPE jobs_total counter" in lines
    assert "jobs_total 3.5" in lines
    assert "plain_counter 0.0" in lines
    assert "level 6.0" in lines
    assert "# TYPE took histogram" in lines
    assert 'took_bucket{le="0.005"} 1.0' in lines
    assert 'took_bucket{le="0.5"} 2.0' in lines
    assert 'took_bucket{le="+Inf"} 2.0' in lines
    assert "took_count 2.0" in lines
    assert "took_sum 0.3" in lines
    buckets = [line.split('"')[1] for line in lines if line.startswith("took_bucket")]
    go_default_buckets = [
        "0.005",
        "0.01",
        "0.025",
        "0.05",
        "0.1",
        "0.25",
        "0.5",
        "1",
        "2.5",
        "5",
        "10",
        "+Inf",
    ]
    assert buckets == go_default_buckets
    user_lines = [line for line in lines if "jobs" in line or "took" in line or "plain" in line]
    assert not [line for line in user_lines if "_created" in line or "plain_counter_total" in line]
    assert not [line for line in lines if line.startswith("both")]


# ----- k8s_status and k8s_event against a fake API server ----------------------------


@pytest.fixture
def fake_api() -> Iterator[FakeKubeAPI]:
    with serve() as api:
        yield api


def widget(name: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "test.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {},
    }
    if status is not None:
        obj["status"] = status
    return obj


def token_env(api: FakeKubeAPI) -> dict[str, str]:
    api.authorization = "Bearer t0ken"
    return {"K8S_AUTH_HOST": api.url, "K8S_AUTH_API_KEY": "t0ken"}


def test_k8s_status_finds_the_kind_by_any_name_and_defaults_to_v1(
    tmp_path: Path, fake_api: FakeKubeAPI
) -> None:
    fake_api.add("pods", {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})
    for name in ("by-plural", "by-singular", "by-short-name"):
        fake_api.add("widgets", widget(name))
    fake_api.add("widgets", widget("inline"))
    tasks = """
    - name: nothing to write, and the object has no status yet
      operator_sdk.util.k8s_status: {kind: Pod, name: p, namespace: ns}
      register: nothing
    - name: no api_version is v1
      operator_sdk.util.k8s_status: {kind: Pod, name: p, namespace: ns, status: {phase: Up}}
    - name: conditions inside status are not validated, as in the original
      operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        kind: Widget
        name: inline
        namespace: ns
        status:
          conditions: [{type: Custom, status: Ready, reason: any text 1}]
    - operator_sdk.util.k8s_status:
        api: test.example.com/v1
        kind: widgets
        name: by-plural
        namespace: ns
        status: {found: plural}
    - operator_sdk.util.k8s_status:
        version: test.example.com/v1
        kind: widget
        name: by-singular
        namespace: ns
        status: {found: singular}
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        kind: wd
        name: by-short-name
        namespace: ns
        status: {found: short}
      register: short
    - assert:
        that:
          - short is changed
          - short.result.status.found == 'short'
          - nothing is not changed
          - nothing.result.status == {}
"""
    assert_ok(run_playbook(tmp_path, tasks, token_env(fake_api)))
    assert fake_api.get("pods", "ns", "p")["status"] == {"phase": "Up"}
    [custom] = fake_api.get("widgets", "ns", "inline")["status"]["conditions"]
    assert custom["status"] == "Ready" and custom["reason"] == "any text 1"
    for name, how in (
        ("by-plural", "plural"),
        ("by-singular", "singular"),
        ("by-short-name", "short"),
    ):
        assert fake_api.get("widgets", "ns", name)["status"] == {"found": how}
    writes = fake_api.writes()
    assert {w.path for w in writes} == {
        "/api/v1/namespaces/ns/pods/p/status",
        "/apis/test.example.com/v1/namespaces/ns/widgets/inline/status",
        *(
            f"/apis/test.example.com/v1/namespaces/ns/widgets/{n}/status"
            for n in ("by-plural", "by-singular", "by-short-name")
        ),
    }
    assert {w.headers["content-type"] for w in writes} == {"application/merge-patch+json"}


def test_k8s_status_asks_the_api_server_for_its_group_version_and_nothing_else(
    tmp_path: Path, fake_api: FakeKubeAPI
) -> None:
    """Every request of a module goes through the operator's proxy: no server
    version, no list of every API group, before the module's own work."""
    fake_api.add("widgets", widget("w"))
    tasks = """
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        kind: Widget
        name: w
        namespace: ns
        status: {phase: Up}
    - operator_sdk.util.k8s_status:
        api_version: unserved.example.com/v1
        kind: Widget
        name: w
        namespace: ns
        status: {phase: Up}
      register: unserved
      ignore_errors: true
    - assert:
        that:
          - >-
            unserved.msg.startswith(
            'Failed to find exact match for unserved.example.com/v1.Widget')
"""
    assert_ok(run_playbook(tmp_path, tasks, token_env(fake_api)))
    assert [(r.method, r.path.split("?")[0]) for r in fake_api.requests] == [
        ("GET", "/apis/test.example.com/v1"),
        ("GET", "/apis/test.example.com/v1/namespaces/ns/widgets/w"),
        ("PATCH", "/apis/test.example.com/v1/namespaces/ns/widgets/w/status"),
        ("GET", "/apis/unserved.example.com/v1"),
    ]
    assert fake_api.get("widgets", "ns", "w")["status"] == {"phase": "Up"}


def test_k8s_status_failures_carry_the_originals_messages_and_error(
    tmp_path: Path, fake_api: FakeKubeAPI
) -> None:
    fake_api.add("widgets", widget("w"))
    base = "api_version: test.example.com/v1, namespace: ns"
    tasks = f"""
    - operator_sdk.util.k8s_status: {{{base}, kind: Widget, name: gone, status: {{a: 1}}}}
      register: missing
      ignore_errors: true
    - operator_sdk.util.k8s_status: {{{base}, kind: Doohickey, name: w, status: {{a: 1}}}}
      register: unknown_kind
      ignore_errors: true
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        namespace: ns
        kind: Widget
        name: w
        conditions:
          - {{type: Available, status: "False", reason: The Ping Failed}}
      register: bad_reason
      ignore_errors: true
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        namespace: ns
        kind: Widget
        name: w
        conditions:
          - {{type: Available, status: "False", lastTransitionTime: 26/03/2021 2:00PM}}
      register: bad_time
      ignore_errors: true
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        namespace: ns
        kind: Widget
        name: w
        status:
          conditions: [{{type: Test, status: Unknown}}]
        conditions: [{{type: Available, status: "False"}}]
      register: both
      ignore_errors: true
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        namespace: ns
        kind: Widget
        name: w
        conditions: [{{type: Available, status: "False", observedGenerations: 1}}]
      register: unknown_field
      ignore_errors: true
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        namespace: ns
        kind: Widget
        name: w
        kubeconfig: /nonexistent/kubeconfig
        api_key: ""  # else host and token from the environment need no kubeconfig
        status: {{a: 1}}
      register: no_kubeconfig
      ignore_errors: true
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        namespace: ns
        kind: Widget
        name: w
        host: http://127.0.0.1:1
        status: {{a: 1}}
      register: unreachable
      ignore_errors: true
    - assert:
        that:
          - missing.msg == 'Failed to retrieve requested object'
          - missing.error.status == 404
          - missing.error.reason == 'Not Found'
          - "'not found' in missing.error.body"
          - >-
            unknown_kind.msg.startswith(
            'Failed to find exact match for test.example.com/v1.Doohickey')
          - bad_reason.msg == 'The specified conditions failed to validate'
          - bad_reason.error == "Condition 'reason' must be a single, CamelCase word"
          - bad_time.msg == 'The specified conditions failed to validate'
          - bad_time.error == "'lastTransitionTime' must be an RFC3339 compliant datetime string"
          - >-
            both.msg ==
            "You cannot specify conditions in both the 'status' and 'conditions' parameters"
          - "'observedGenerations' in unknown_field.msg"
          - no_kubeconfig.msg.startswith('Failed to load kubeconfig due to')
          - unreachable.msg.startswith('Failed to get client due to')
"""
    assert_ok(run_playbook(tmp_path, tasks, token_env(fake_api)))
    assert fake_api.writes() == []


def test_k8s_status_replace_puts_exactly_the_given_status_and_returns_a_list(
    tmp_path: Path, fake_api: FakeKubeAPI
) -> None:
    fake_api.add(
        "widgets",
        widget(
            "w",
            {
                "old": 1,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Up",
                        "message": "stale",
                        "lastTransitionTime": "2024-01-01T00:00:00Z",
                    },
                    {
                        "type": "Other",
                        "status": "True",
                        "lastTransitionTime": "2024-01-01T00:00:00Z",
                    },
                ],
            },
        ),
    )
    tasks = """
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        kind: Widget
        name: w
        namespace: ns
        replace: true
        status: {fresh: 2}
        conditions: [{type: Ready, status: "True", reason: Up}]
      register: replaced
    - name: the same again, by the force alias, changes nothing
      operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        kind: Widget
        name: w
        namespace: ns
        force: true
        status: {fresh: 2}
        conditions: [{type: Ready, status: "True", reason: Up}]
      register: again
    - assert:
        that:
          - replaced is changed
          - replaced.result | length == 1
          - replaced.result[0].status.fresh == 2
          - again is not changed
"""
    assert_ok(run_playbook(tmp_path, tasks, token_env(fake_api)))
    assert fake_api.get("widgets", "ns", "w")["status"] == {
        "fresh": 2,
        "conditions": [
            # The message it was not given is gone; its transition time stays
            # (the status did not change).
            {
                "type": "Ready",
                "status": "True",
                "reason": "Up",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            },
        ],
    }
    assert [w.method for w in fake_api.writes()] == ["PUT"]


def test_connection_options_and_their_environment_variables_reach_the_api_server(
    tmp_path: Path, fake_api: FakeKubeAPI
) -> None:
    fake_api.add("widgets", widget("w"))
    fake_api.authorization = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    target = "\n        ".join(
        ["api_version: test.example.com/v1", "kind: Widget", "name: w", "namespace: ns"]
    )
    tasks = f"""
    - name: user and password as parameters
      operator_sdk.util.k8s_status:
        {target}
        host: {fake_api.url}
        username: alice
        password: s3cret
        cert_file: /nonexistent/client.crt
        key_file: /nonexistent/client.key
        persist_config: false
        status: {{by: parameters}}
    - name: the same from K8S_AUTH_*
      operator_sdk.util.k8s_status:
        {target}
        status: {{by: environment}}
      environment:
        K8S_AUTH_HOST: {fake_api.url}
        K8S_AUTH_USERNAME: alice
        K8S_AUTH_PASSWORD: s3cret
        K8S_AUTH_CLIENT_CERT: /nonexistent/client.crt
        K8S_AUTH_KEY_FILE: /nonexistent/client.key
        K8S_AUTH_VALIDATE_CERTS: "false"
        K8S_AUTH_PERSIST_CONFIG: "false"
    - name: through a proxy, to a host only the proxy reaches
      operator_sdk.util.k8s_status:
        {target}
        host: http://kube.invalid:6443
        username: alice
        password: s3cret
        proxy: {fake_api.url}
        status: {{by: proxy}}
    - name: the proxy from K8S_AUTH_PROXY
      operator_sdk.util.k8s_status:
        {target}
        host: http://kube.invalid:6443
        username: alice
        password: s3cret
        status: {{by: proxy-environment}}
      environment:
        K8S_AUTH_PROXY: {fake_api.url}
"""
    assert_ok(run_playbook(tmp_path, tasks))
    assert fake_api.get("widgets", "ns", "w")["status"] == {"by": "proxy-environment"}
    writes = fake_api.writes()
    assert [(w.body["status"]["by"], w.proxied) for w in writes] == [
        ("parameters", False),
        ("environment", False),
        ("proxy", True),
        ("proxy-environment", True),
    ]
    assert {r.headers.get("authorization") for r in fake_api.requests} == {fake_api.authorization}


def test_k8s_event_accepts_the_originals_options_and_links_the_involved_object(
    tmp_path: Path, fake_api: FakeKubeAPI
) -> None:
    fake_api.add("widgets", widget("w"))
    tasks = """
    - name: state and merge_type are accepted, involvedObject is optional
      operator_sdk.util.k8s_event:
        state: present
        merge_type: [merge]
        name: bare
        namespace: ns
        message: nothing involved
        reason: Noted
    - name: the involved object is found by its short name and linked by uid
      operator_sdk.util.k8s_event:
        name: linked
        namespace: ns
        message: about w
        reason: Linked
        involvedObject: {apiVersion: test.example.com/v1, kind: wd, name: w, namespace: ns}
      register: linked
    - assert:
        that:
          - linked is changed
          - linked.result.involvedObject.uid == 'uid-w'
"""
    assert_ok(run_playbook(tmp_path, tasks, token_env(fake_api)))
    bare = fake_api.get("events", "ns", "bare")
    assert bare["message"] == "nothing involved" and bare["count"] == 1
    assert bare["involvedObject"] == {"namespace": "ns"}
    widget_version = fake_api.get("widgets", "ns", "w")["metadata"]["resourceVersion"]
    assert fake_api.get("events", "ns", "linked")["involvedObject"] == {
        "apiVersion": "test.example.com/v1",
        "kind": "wd",
        "name": "w",
        "namespace": "ns",
        "uid": "uid-w",
        "resourceVersion": widget_version,
    }


def test_check_mode_reports_what_would_change_and_writes_nothing(
    tmp_path: Path, fake_api: FakeKubeAPI
) -> None:
    fake_api.add("widgets", widget("w", {"old": 1}))
    tasks = """
    - operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        kind: Widget
        name: w
        namespace: ns
        status: {new: 2}
      register: status
    - name: an object not created yet (reconcile --check -f)
      operator_sdk.util.k8s_status:
        api_version: test.example.com/v1
        kind: Widget
        name: not-yet
        namespace: ns
        status: {new: 2}
      register: not_yet
    - operator_sdk.util.k8s_event: {name: e, namespace: ns, reason: Checked, message: m}
      register: event
    - name: sends nothing, so needs no operator
      operator_sdk.util.osdk_metric: {name: m, description: M, counter: {increment: true}}
      register: metric
    - assert:
        that:
          - status is changed
          - "status.result.status == {'old': 1, 'new': 2}"
          - not_yet is changed
          - event is changed
          - event.result.reason == 'Checked'
          - metric is changed
"""
    assert_ok(run_playbook(tmp_path, tasks, token_env(fake_api), header="  check_mode: true\n"))
    assert fake_api.writes() == []
    assert fake_api.get("widgets", "ns", "w")["status"] == {"old": 1}


# ----- the collection on Python 3.9 (used on its own, outside the operator) ---------


@pytest.mark.skipif(not PYTHON_3_9.exists(), reason="needs Python 3.9 at " + str(PYTHON_3_9))
def test_the_collection_compiles_and_runs_on_python_3_9(
    tmp_path: Path, metrics_address: tuple[str, list[dict[str, Any]]]
) -> None:
    sources = sorted(str(path) for path in COLLECTION.rglob("*.py"))
    compiled = subprocess.run(
        [
            str(PYTHON_3_9),
            "-c",
            "import sys\nfor path in sys.argv[1:]:\n    compile(open(path).read(), path, 'exec')",
            *sources,
        ],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr
    address, received = metrics_address
    tasks = f"""
    - operator_sdk.util.requeue_after: {{time: 2m}}
      register: later
    - operator_sdk.util.osdk_metric:
        name: on_39
        description: From Python 3.9
        address: {address}
        gauge: {{set_to_current_time: true}}
    - name: imports on 3.9, and says what it lacks there
      operator_sdk.util.k8s_status: {{kind: Pod, name: p, namespace: ns, status: {{a: 1}}}}
      register: status
      ignore_errors: true
    - operator_sdk.util.k8s_event: {{name: e, namespace: ns, message: m, reason: R}}
      register: event
      ignore_errors: true
    - assert:
        that:
          - later.period == '2m'
          - "'kubernetes' in status.msg and 'Failed to import' in status.msg"
          - "'kubernetes' in event.msg and 'Failed to import' in event.msg"
"""
    assert_ok(run_playbook(tmp_path, tasks, python=str(PYTHON_3_9)))
    assert [m["name"] for m in received] == ["on_39"]


# ----- k8s_status's merge logic, without a cluster ---------------------------------


def load_util(name: str) -> ModuleType:
    # status_merge imports nothing of Ansible's: loaded from its file alone.
    path = COLLECTION / "plugins" / "module_utils" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_osdk_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def merge() -> ModuleType:
    return load_util("status_merge")


OLD = "2024-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("old", "given", "stored"),
    [
        pytest.param(
            None,
            {"type": "Ready", "status": "True"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "NOW"},
            id="new type: stamped now",
        ),
        pytest.param(
            {"type": "Ready", "status": "True", "message": "m", "lastTransitionTime": OLD},
            {"type": "Ready", "status": "True"},
            {"type": "Ready", "status": "True", "message": "m", "lastTransitionTime": OLD},
            id="nothing given differs: old kept untouched",
        ),
        pytest.param(
            {"type": "Ready", "status": "True", "lastTransitionTime": OLD},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": OLD},
            id="a transition time alone is no change",
        ),
        pytest.param(
            {
                "type": "Ready",
                "status": "True",
                "reason": "A",
                "message": "m",
                "lastTransitionTime": OLD,
            },
            {"type": "Ready", "status": "True", "reason": "B"},
            {"type": "Ready", "status": "True", "reason": "B", "lastTransitionTime": OLD},
            id="replaced whole: message gone, same status keeps its time",
        ),
        pytest.param(
            {"type": "Ready", "status": "True", "lastTransitionTime": OLD},
            {"type": "Ready", "status": "False"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "NOW"},
            id="status changed: stamped now",
        ),
        pytest.param(
            {"type": "Ready", "status": "True", "lastTransitionTime": OLD},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2023-05-05T00:00:00Z"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2023-05-05T00:00:00Z"},
            id="a given time wins when the condition changes",
        ),
    ],
)
def test_conditions_merge_by_type(
    merge: ModuleType, old: dict | None, given: dict, stored: dict
) -> None:
    current = [{"type": "First", "status": "True"}] + ([old] if old else [])
    merged = merge.merge_conditions(current, [given], "NOW")
    assert merged == [{"type": "First", "status": "True"}, stored]


def test_status_patch_leads_to_what_the_server_stores(merge: ModuleType) -> None:
    current = {"keep": 1, "info": {"x": 1, "y": 2}, "nodes": ["a", "b"], "conditions": []}
    patch = merge.status_patch(
        current, {"info": {"y": 3}, "nodes": ["a"], "gone": None, "keep": None}, "NOW"
    )
    assert merge.apply_merge_patch(current, patch) == {
        "info": {"x": 1, "y": 3},
        "nodes": ["a"],
        "conditions": [],
    }
    # null for a key that is not there changes nothing: no write, changed false
    assert merge.apply_merge_patch(current, {"absent": None}) == current


def test_condition_validation_follows_the_original(merge: ModuleType) -> None:
    ok = merge.validate_conditions(
        [
            {"type": "A", "status": "True", "reason": "CamelCase", "message": None},
            {
                "type": "B",
                "status": "False",
                "reason": "Ready2_go",
                "lastTransitionTime": "2024-01-01 12:00+02:00",
            },
        ]
    )
    assert ok[0] == {"type": "A", "status": "True", "reason": "CamelCase"}
    for condition, error in [
        ({"type": "", "status": "True"}, "Condition `type` must be set"),
        ({"type": "A", "status": "Yes"}, "Condition 'status' must be one of"),
        ({"type": "A", "status": "True", "reason": "two words"}, "CamelCase"),
        ({"type": "A", "status": "True", "lastHeartbeatTime": "yesterday"}, "RFC3339"),
        ({"type": "A", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00z"}, "RFC3339"),
    ]:
        with pytest.raises(merge.ConditionError, match=error):
            merge.validate_conditions([condition])
