"""Attacks on the webhook port of a real `ansible-operator run` (issue 25, items 3 and 6).

Anyone who reaches the webhook Service can connect and post AdmissionReviews. Here the
attacker connects from 127.0.0.2 while the local API server calls from 127.0.0.1, so the
operator sees two clients, as it sees a Pod and the API server in a cluster. The operator
starts with a soft limit of 256 open files (hard: 1024, which it raises itself to).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.serving.http_limits import LOG_INTERVAL
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

ATTACKER = "127.0.0.2"
OPEN_FILES = (256, 1024)
CASE = "webhook-attacks.test.io/case"
ROLE = """
- name: look at the object
  set_fact:
    seen: "{{ admission.object.metadata.name }}"
- operator_sdk.util.admission_response:
    allowed: true
"""
WATCHES = f"""
- webhook:
    name: check.webhook-attacks.test.io
    type: validating
    failurePolicy: Fail
    timeoutSeconds: 10
    rules:
      - {{apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}}
    objectSelector: {{matchLabels: {{{CASE}: checked}}}}
    role: check
"""
PATH = "/validate/check.webhook-attacks.test.io"
FLOOD_CAP = 120.0  # seconds a flood lasts at most, should its block never end


def project(directory: Path) -> Path:
    (directory / "roles" / "check" / "tasks").mkdir(parents=True)
    (directory / "roles" / "check" / "tasks" / "main.yml").write_text(ROLE)
    (directory / "watches.yaml").write_text(WATCHES)
    return directory / "watches.yaml"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_operator(cluster: Cluster, watches: Path, name: str, port: int = 0) -> OperatorProcess:
    return OperatorProcess(
        watches,
        cluster.kubeconfig,
        log_path=watches.parent / "operator.log",
        args=[
            f"--webhook-bind-address=127.0.0.1:{port}",
            f"--webhook-configuration-name={name}",
            SERVE_METRICS,
        ],
        open_files=OPEN_FILES,
    ).start()


def webhook_port(operator: OperatorProcess) -> int:
    return operator.port("webhook")


@pytest.fixture(scope="module")
def operator(
    kube_cluster: Cluster, kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    watches = project(tmp_path_factory.mktemp("webhook-attacks"))
    process = start_operator(kube_cluster, watches, f"attacks-{uuid.uuid4().hex[:6]}")
    try:
        webhook_port(process)
        eventually(lambda: admitted(kube_api, "default"), timeout=60, what="the webhook served")
        yield process
    finally:
        process.stop()


def admitted(api: client.ApiClient, namespace: str) -> bool:
    """A create through the API server, as kubectl makes it, went through the webhook."""
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"real-{uuid.uuid4().hex[:8]}", labels={CASE: "checked"})
    )
    try:
        client.CoreV1Api(api).create_namespaced_config_map(namespace, body, dry_run="All")
    except client.ApiException:
        return False
    return True


def review(uid: str, obj_json: str = '{"metadata": {"name": "x"}}') -> bytes:
    head = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "namespace": "default",
        "operation": "CREATE",
    }
    request = json.dumps(head)[:-1] + ', "object": ' + obj_json + "}"
    return (
        '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": '
        + request
        + "}"
    ).encode()


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def attacker_session() -> aiohttp.ClientSession:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    connector = aiohttp.TCPConnector(ssl=insecure, local_addr=(ATTACKER, 0), limit=0)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30))


@contextlib.contextmanager
def flood(port: int, clients: int) -> Iterator[list[int]]:
    """`clients` concurrent attackers posting reviews (in a thread) while the block runs;
    yields the statuses they got, complete once the block ends."""
    statuses: list[int] = []
    stopped = threading.Event()

    async def attack() -> None:
        deadline = time.monotonic() + FLOOD_CAP
        async with attacker_session() as session:

            async def one_client(number: int) -> None:
                sent = 0
                while not stopped.is_set() and time.monotonic() < deadline:
                    sent += 1
                    url = f"https://127.0.0.1:{port}{PATH}"
                    try:
                        async with session.post(url, data=review(f"a-{number}-{sent}")) as got:
                            statuses.append(got.status)
                    except (aiohttp.ClientError, TimeoutError):
                        statuses.append(0)

            await asyncio.gather(*(one_client(n) for n in range(clients)))

    thread = threading.Thread(target=lambda: asyncio.run(attack()))
    thread.start()
    try:
        yield statuses
    finally:
        stopped.set()
        thread.join(timeout=60)


def test_a_flood_from_one_client_leaves_the_api_servers_admissions_answered(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    port = webhook_port(operator)
    started = time.monotonic()
    with flood(port, clients=24) as statuses:
        eventually(lambda: statuses.count(429) > 0, timeout=30, what="the flood throttled")
        core = client.CoreV1Api(kube_api)
        for number in range(6):
            # failurePolicy Fail: a webhook that did not answer in 10s fails the create.
            core.create_namespaced_config_map(
                kube_namespace,
                client.V1ConfigMap(
                    metadata=client.V1ObjectMeta(name=f"real-{number}", labels={CASE: "checked"})
                ),
            )
    flooded = time.monotonic() - started
    refused, answered = statuses.count(429), statuses.count(200)
    assert refused > answered
    # What the operator counted is what the clients saw (the metric is how a user
    # watches refusals, whatever the log level).
    assert operator.metric("ansible_operator_webhook_requests_refused_total", status="429") >= (
        refused
    )
    # Refusals are summarised, however many there were: a line per LOG_INTERVAL.
    lines = operator.logs.splitlines()
    refusal_lines = [line for line in lines if "webhook requests refused (429)" in line]
    assert 1 <= len(refusal_lines) <= flooded / LOG_INTERVAL + 2, refusal_lines
    assert not [line for line in lines if "Traceback" in line]
    # A line per decision at most, and none per allowed one at the default level (they
    # are debug lines): the flood's admitted requests write nothing each.
    decided = operator.metric("ansible_operator_webhook_admissions_total")
    allowed = operator.metric("ansible_operator_webhook_admissions_total", decision="allowed")
    assert decided >= allowed >= answered
    decision_lines = [line for line in lines if "admission webhook=" in line]
    assert len(decision_lines) <= decided - allowed


def test_connections_that_never_send_a_client_hello_exhaust_nothing(
    operator: OperatorProcess, kube_api: client.ApiClient
) -> None:
    port = webhook_port(operator)
    silent: list[socket.socket] = []
    try:
        for _ in range(1100):  # more than the operator's 1024 open files
            sock = socket.create_connection(
                ("127.0.0.1", port), timeout=10, source_address=(ATTACKER, 0)
            )
            silent.append(sock)
        assert operator.health("/healthz") == 200
        assert admitted(kube_api, "default")
        # Each one is closed: the oldest at once to make room, the rest at the handshake
        # timeout (10s).
        for sock in silent:
            sock.settimeout(60)
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b""
    finally:
        for sock in silent:
            sock.close()
    log = operator.logs
    assert "http server full" in log and "server=webhook" in log
    assert "Too many open files" not in log
    assert "Traceback" not in log
    assert operator.health("/healthz") == 200


async def test_a_deeply_nested_review_is_refused_naming_the_problem_without_a_traceback(
    operator: OperatorProcess,
) -> None:
    url = f"https://127.0.0.1:{webhook_port(operator)}{PATH}"
    async with attacker_session() as session:
        async with session.post(url, data=review("deep-700", nested(700))) as response:
            assert response.status == 200
            answer: dict[str, Any] = (await response.json())["response"]
        assert answer["allowed"] is False
        assert "nests more than 100 levels deep" in answer["status"]["message"]
        async with session.post(url, data=review("deep-20000", nested(20_000))) as response:
            assert response.status == 400
            # The caller may be anyone: the body says no more; the operator's log says why.
            assert await response.text() == "not an AdmissionReview this webhook can read\n"
    assert "Traceback" not in operator.logs


async def test_a_lone_surrogate_is_denied_naming_it_and_nothing_private_is_answered(
    operator: OperatorProcess,
) -> None:
    url = f"https://127.0.0.1:{webhook_port(operator)}{PATH}"
    body = review("surrogate", '{"metadata": {"name": "x", "labels": {"a": "\\ud800"}}}')
    async with attacker_session() as session, session.post(url, data=body) as response:
        assert response.status == 200
        text = await response.text()
    answer = json.loads(text)["response"]
    assert answer["allowed"] is False
    assert (
        "object.metadata.labels.a: the string holds a lone UTF-16 surrogate"
        in (answer["status"]["message"])
    )
    # Nothing of the run's private files or of a parser's innards reaches the caller.
    assert "extravars" not in text and "cluster_vars" not in text and "YAML" not in text
    assert "Traceback" not in operator.logs


def test_a_stale_configuration_of_another_id_calling_this_operator_is_removed(
    kube_cluster: Cluster, kube_api: client.ApiClient, tmp_path: Path
) -> None:
    port = free_port()
    admission = client.AdmissionregistrationV1Api(kube_api)
    stale_name, elsewhere_name = f"stale-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"

    def configuration(name: str, url_port: int) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {
                "name": name,
                "labels": {"app.kubernetes.io/managed-by": "ansible-operator"},
            },
            "webhooks": [
                {
                    "name": "old.webhook-attacks.test.io",
                    "clientConfig": {"url": f"https://127.0.0.1:{url_port}/validate/old"},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["configmaps"],
                            "operations": ["CREATE"],
                        }
                    ],
                    "objectSelector": {"matchLabels": {CASE: name}},
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        }

    admission.create_validating_webhook_configuration(configuration(stale_name, port))
    admission.create_validating_webhook_configuration(configuration(elsewhere_name, free_port()))
    operator = None
    try:
        operator = start_operator(
            kube_cluster, project(tmp_path), f"new-{uuid.uuid4().hex[:6]}", port
        )
        # Deleted at start, before the operator was ready.
        with pytest.raises(client.ApiException) as gone:
            admission.read_validating_webhook_configuration(stale_name)
        assert gone.value.status == 404
        deleted = "stale webhook configuration deleted kind=ValidatingWebhookConfiguration"
        assert f"{deleted} name={stale_name}" in operator.logs  # what its user reads
        # One calling another address is not this operator's to judge.
        assert admission.read_validating_webhook_configuration(elsewhere_name).metadata.name
    finally:
        if operator is not None:
            operator.stop()
        for name in (stale_name, elsewhere_name):
            with contextlib.suppress(client.ApiException):
                admission.delete_validating_webhook_configuration(name)
