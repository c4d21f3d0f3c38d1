"""Malformed requests to the operator's health, metrics and proxy ports get
a 4xx and no traceback (issue 25, item 6).

aiohttp answered a request it could not parse with a 400, then logged an
ERROR with a traceback for it: anyone who can reach a port wrote tracebacks
into the operator's log at will, which read like the operator's own bugs; and
it served HTTP/0.9 and HTTP/2.0 request lines as HTTP/1. The attack sends
each malformed request below over a raw socket to each port of a real
operator logging at debug level, then reads its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes import client
from proxy_run import Run, proxy_for_a_run

from ansible_operator.cluster import Cluster
from ansible_operator.kube.config import load_config
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess

pytestmark = pytest.mark.cluster

FAULT_OPERATOR = Path(__file__).resolve().parents[1] / "faults" / "operator"
ANSWER_WITHIN = 30.0  # seconds, for a server's answer on a busy machine
GOOD_PATHS = {"health": "/healthz", "metrics": "/metrics", "proxy": "/version"}
NOT_GZIP = b'{"not": "gzip"}'

# Each a request that would be answered, but for one defect; {path} is a path
# the server serves.
MALFORMED: dict[str, bytes] = {
    "a request line that is not HTTP": b"GARBAGE\r\n\r\n",
    "a method with invalid characters": b"G(T {path} HTTP/1.1\r\nHost: x\r\n\r\n",
    "a NUL in the request line": b"GET {path}\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
    "a raw non-UTF-8 path": b"GET {path}/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
    "a request line of 20 KiB": b"GET {path}?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "a version that is not a number": b"GET {path} HTTP/1.x\r\nHost: x\r\n\r\n",
    "HTTP/0.9": b"GET {path}\r\n\r\n",
    "HTTP/2.0 on an HTTP/1 port": b"GET {path} HTTP/2.0\r\nHost: x\r\n\r\n",
    "a broken absolute-form URI": b"GET http://[::1{path} HTTP/1.1\r\nHost: x\r\n\r\n",
    "bare LF line ends": b"GET {path} HTTP/1.1\nHost: x\n\n",
    "a header without a colon": b"GET {path} HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n",
    "a space before a header's colon": b"GET {path} HTTP/1.1\r\nHost : x\r\n\r\n",
    "a NUL in a header": b"GET {path} HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "a folded header line": b"GET {path} HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
    "a header of 70 KiB": b"GET {path} HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 70_000 + b"\r\n\r\n",
    "300 headers": b"GET {path} HTTP/1.1\r\n"
    + b"".join(b"X-%d: a\r\n" % n for n in range(300))
    + b"\r\n",
    "a Content-Length that is not a number": (
        b"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"
    ),
    "a negative Content-Length": b"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    "two different Content-Lengths": (
        b"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"
    ),
    "a chunk size that is not hex": (
        b"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\nab\r\n0\r\n\r\n"
    ),
    "chunked and a Content-Length": (
        b"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: 5\r\n\r\n0\r\n\r\n"
    ),
    "an unknown Transfer-Encoding": (
        b"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: rot13\r\n\r\n"
    ),
    "a gzip body that is not gzip": (
        b"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n" % len(NOT_GZIP) + NOT_GZIP
    ),
    "CONNECT": b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    "a TLS ClientHello": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
}


def answer_status(port: int, request: bytes) -> int | None:
    """The status a server at 127.0.0.1:`port` answers `request` with; None
    when it closes the connection without an answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN) as sock:
        with contextlib.suppress(OSError):  # it may answer and close before all is sent
            sock.sendall(request)
        answer = b""
        while b"\r\n" not in answer:
            try:
                chunk = sock.recv(4096)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            answer += chunk
    status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
    assert status_line.startswith("HTTP/"), f"not an HTTP answer: {status_line!r}"
    return int(status_line.split()[1])


def assert_refused(server: str, defect: str, status: int | None) -> None:
    assert status is None or 400 <= status < 500, f"{server}, {defect}: answered {status}"


def assert_no_traceback_nor_error(log: str) -> None:
    assert "Traceback" not in log, log[-6000:]
    errors = [line for line in log.splitlines() if re.match(r"\S+ (ERROR|CRITICAL) ", line)]
    assert not errors, "\n".join(errors)


@pytest.fixture(scope="module")
def operator(
    kube_cluster: Cluster, kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    apply_manifests(kube_api, FAULT_OPERATOR / "crds.yaml")
    process = OperatorProcess(
        FAULT_OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path_factory.mktemp("malformed") / "operator.log",
        args=["--metrics-bind-address=127.0.0.1:0", "--zap-log-level=debug"],
    )
    try:
        yield process.start()
    finally:
        process.stop()


@pytest.mark.parametrize("server", ["health", "metrics", "proxy"])
def test_malformed_requests_get_a_4xx_and_leave_no_traceback(
    operator: OperatorProcess, server: str
) -> None:
    port = operator.port(server)
    path = GOOD_PATHS[server].encode()
    log_before = len(operator.logs)

    for defect, template in MALFORMED.items():
        assert_refused(server, defect, answer_status(port, template.replace(b"{path}", path)))

    # The server still answers a sound request (the proxy: 401, no token).
    sound = b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path
    assert answer_status(port, sound) == (401 if server == "proxy" else 200)
    log = operator.logs[log_before:]
    assert_no_traceback_nor_error(log)
    # At most one line per malformed request, at debug level.
    assert log.count("refused a malformed request") <= len(MALFORMED)


# ----- with a run's token: requests that reach the proxy's own handling -------
@pytest.fixture
async def run(kube_cluster: Cluster, kube_namespace: str) -> AsyncIterator[Run]:
    async with proxy_for_a_run(load_config(kube_cluster.kubeconfig), kube_namespace) as run:
        yield run


def with_token(run: Run, request: bytes) -> bytes:
    line, _, rest = request.partition(b"\r\n")
    namespace = run.namespace.encode()
    line = line.replace(b"{ns}", namespace)
    return line + b"\r\nAuthorization: Bearer " + run.token.encode() + b"\r\n" + rest


AUTHENTICATED_MALFORMED: dict[str, bytes] = {
    "a gzip body that is not gzip": (
        b"POST /api/v1/namespaces/{ns}/configmaps HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n" % len(NOT_GZIP) + NOT_GZIP
    ),
    "invalid percent-encoding in the path": (
        b"GET /api/v1/namespaces/{ns}/configmaps/%zz HTTP/1.1\r\nHost: x\r\n\r\n"
    ),
    "a percent-encoded non-UTF-8 name": (
        b"GET /api/v1/namespaces/{ns}/configmaps/%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n"
    ),
    "HTTP/0.9": b"GET /api/v1/namespaces/{ns}/configmaps\r\n\r\n",
    "HTTP/2.0 on an HTTP/1 port": (
        b"GET /api/v1/namespaces/{ns}/configmaps HTTP/2.0\r\nHost: x\r\n\r\n"
    ),
    "CONNECT": b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    "a WebSocket upgrade without a key": (
        b"GET /api/v1/namespaces/{ns}/pods/p/exec HTTP/1.1\r\nHost: x\r\n"
        b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    ),
}


async def test_malformed_requests_with_a_run_token_get_a_4xx_and_leave_no_traceback(
    run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = int(run.url.rpartition(":")[2])
    for defect, template in AUTHENTICATED_MALFORMED.items():
        status = await asyncio.to_thread(answer_status, port, with_token(run, template))
        assert_refused("proxy", defect, status)

    problems = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not problems, [(r.name, r.getMessage()) for r in problems]


async def test_an_absolute_form_uri_is_read_as_its_path_never_fetched_from_its_host(
    run: Run,
) -> None:
    # RFC 9112 has servers accept the absolute form; the proxy must not
    # become a proxy to the host it names.
    request = b"GET http://example.com/api/v1/namespaces/{ns}/configmaps/owner HTTP/1.1\r\n"
    request += b"Host: example.com\r\nConnection: close\r\n\r\n"
    port = int(run.url.rpartition(":")[2])
    answer = await asyncio.to_thread(whole_answer, port, with_token(run, request))
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b'"kind":"ConfigMap"' in answer.replace(b" ", b"") and b"owner" in answer


def whole_answer(port: int, request: bytes) -> bytes:
    """Everything a server at 127.0.0.1:`port` sends back for `request`, to its close."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN) as sock:
        sock.sendall(request)
        return b"".join(iter(lambda: sock.recv(65536), b""))
