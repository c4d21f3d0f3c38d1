"""A local user cannot stop the operator with slow, half-sent requests
(issue 18, item 3).

The attack: open many connections to the API proxy (any local user can reach
it on loopback) and to the health server, send the start of a request and
never finish it. Held for ever, they use up the operator's open files: no run
can start, /healthz cannot answer, and every failed accept logs a traceback.
The operator here starts with a soft limit of 256 open files (hard: 1024),
and the attack opens more connections than that to each server.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.serving.http_limits import LOG_INTERVAL
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import wait_for_condition

pytestmark = pytest.mark.cluster

FAULT_OPERATOR = Path(__file__).resolve().parents[1] / "faults" / "operator"
GROUP, VERSION = "faults.ansible-operator.io", "v1alpha1"
SOFT_OPEN_FILES, HARD_OPEN_FILES = 256, 1024  # the operator's RLIMIT_NOFILE at start
HALF_SENT = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@contextlib.contextmanager
def half_sent_requests(port: int, count: int) -> Iterator[int]:
    """Up to `count` connections to 127.0.0.1:`port`, each with the start of a
    request and no end; stops early once the server accepts no more. Yields how
    many were opened."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            except OSError:
                break  # the server's accept queue is full: it is not accepting
            sockets.append(sock)
            with contextlib.suppress(OSError):  # the server may have closed it already
                sock.sendall(HALF_SENT)
        yield len(sockets)
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture
def operator(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    apply_manifests(kube_api, FAULT_OPERATOR / "crds.yaml")
    process = OperatorProcess(
        FAULT_OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace},
        open_files=(SOFT_OPEN_FILES, HARD_OPEN_FILES),
    )
    try:
        yield process.start()
    finally:
        process.stop()


def test_slow_half_sent_requests_stop_neither_runs_nor_health_nor_flood_the_log(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    proxy_port, health_port = operator.port("proxy"), operator.port("health")

    attack_began = time.monotonic()
    with (
        half_sent_requests(proxy_port, 2 * SOFT_OPEN_FILES) as at_proxy,
        half_sent_requests(health_port, SOFT_OPEN_FILES) as at_health,
    ):
        # Every one was accepted: the servers kept accepting by closing the
        # connections that waited longest, and never ran out of files.
        assert (at_proxy, at_health) == (2 * SOFT_OPEN_FILES, SOFT_OPEN_FILES)
        assert operator.health("/healthz") == 200

        # A run's requests through the proxy still answer: it converges.
        client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            "works",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Work",
                "metadata": {"name": "despite-slowloris"},
                "spec": {"value": "done"},
            },
        )
        done = wait_for_condition(
            kube_api,
            GROUP,
            VERSION,
            "works",
            kube_namespace,
            "despite-slowloris",
            "Successful",
            timeout=120,
        )
        assert done["status"]["value"] == "done"
        assert operator.health("/healthz") == 200

    attacked_for = time.monotonic() - attack_began
    lines = operator.logs.splitlines()
    full = [line for line in lines if "http server full" in line]
    assert full  # the attack did reach the servers' caps
    # Summarised, not a line per connection: a line per LOG_INTERVAL and server at most,
    # however many connections a machine's speed let the attack make.
    for server in ("proxy", "health"):
        said = [line for line in full if f"server={server}" in line]
        assert len(said) <= attacked_for / LOG_INTERVAL + 1, said
    assert not [line for line in lines if "Too many open files" in line]
    assert not [line for line in lines if "Traceback" in line]
