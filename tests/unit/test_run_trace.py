"""A run's trace: its span, its tasks' under it, and each API request the run
sent through the proxy under the task that was running when it was sent (told
by the times Ansible and the proxy stamped, whatever order the event and the
request arrive in), else under the run; and the proxy's side of it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from recorded_spans import RecordingTracer

from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.observability.request_spans import ApiRequest, request_record, verb
from ansible_operator.observability.tracing import Tracing
from ansible_operator.proxy.server import ApiProxy
from ansible_operator.runner import fake
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.redaction import Redactor
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.run_trace import MAX_PENDING, RunTrace, run_outcome, start_run_trace

SECOND = 1_000_000_000
T0 = 1_800_000_000 * SECOND  # ns since the epoch
OWNER = Owner("cache.example.com", "v1alpha1", "Memcached", "team", "mc", "uid-1")


def stamp(ns: int) -> str:
    seconds, rest = divmod(ns, SECOND)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1000:06d}+00:00"


def task_events(name: str, uuid: str, start: int, end: int) -> list[dict[str, Any]]:
    data = {
        "task": name,
        "task_uuid": uuid,
        "host": "localhost",
        "task_path": f"/r/main.yml:{uuid}",
    }
    return [
        {"event": "runner_on_start", "created": stamp(start), "event_data": data},
        {
            "event": "runner_on_ok",
            "created": stamp(end),
            "event_data": {**data, "start": stamp(start), "end": stamp(end), "res": {}},
        },
    ]


def request(start: int, end: int | None = None, **fields: Any) -> ApiRequest:
    values: dict[str, Any] = {
        "method": "GET",
        "path": "/api/v1/namespaces/team/configmaps/mc",
        "group": "",
        "plural": "configmaps",
        "subresource": "",
        "namespace": "team",
        "name": "mc",
        "watch": False,
        "status": 200,
        "start_ns": start,
        "end_ns": end if end is not None else start + 1000,
    }
    return ApiRequest(**{**values, **fields})


def new_trace(tracer: RecordingTracer, redactor: Redactor | None = None) -> RunTrace:
    return RunTrace(
        tracer,
        parent=None,
        attributes={"ansible.run.ident": "1-x"},
        redactor=redactor or Redactor(),
    )


def test_a_request_is_the_child_of_the_task_that_sent_it_whatever_arrives_first() -> None:
    tracer = RecordingTracer()
    trace = new_trace(tracer)
    first = task_events("Read", "1", T0, T0 + SECOND)
    second = task_events("Write", "2", T0 + 2 * SECOND, T0 + 3 * SECOND)

    trace.event(first[0])
    trace.request(request(T0 + SECOND // 2))  # before its task's result arrives
    trace.event(first[1])
    trace.event(second[0])
    trace.request(request(T0 + 2 * SECOND + 5, method="POST", name=""))
    trace.event(second[1])
    trace.request(request(T0 + 2 * SECOND + 9, method="GET", watch=True))  # a watch ends late
    trace.end({"ansible.run.status": "successful"})

    run = tracer.named("ansible run")
    read, write = tracer.named("Read"), tracer.named("Write")
    assert tracer.children(run) == [read, write]
    assert [span.name for span in tracer.children(read)] == ["proxy get configmaps"]
    assert [span.name for span in tracer.children(write)] == [
        "proxy create configmaps",
        "proxy watch configmaps",
    ]
    assert all(span.ended for span in tracer.spans)
    assert run.attributes["ansible.run.status"] == "successful" and run.error is None


def test_requests_outside_every_task_are_the_runs_and_wait_no_longer_than_it() -> None:
    tracer = RecordingTracer()
    trace = new_trace(tracer)
    trace.request(request(T0))  # e.g. a lookup plugin's, before the first task
    for event in task_events("Read", "1", T0 + SECOND, T0 + 2 * SECOND):
        trace.event(event)
    trace.request(request(T0 + 3 * SECOND))  # a task whose events never came
    trace.end({})

    run = tracer.named("ansible run")
    assert [span.name for span in tracer.children(run)] == [
        "Read",
        "proxy get configmaps",
        "proxy get configmaps",
    ]
    trace.request(request(T0 + 4 * SECOND))  # after the run: dropped
    trace.event(task_events("Late", "9", T0, T0 + 1)[1])
    assert len(tracer.spans) == 4


def test_a_run_that_floods_requests_holds_a_bounded_number() -> None:
    tracer = RecordingTracer()
    trace = new_trace(tracer)
    trace.event(task_events("Loop", "1", T0, T0 + SECOND)[0])
    for index in range(MAX_PENDING + 10):
        trace.request(request(T0 + index))
    assert len(trace.pending) == MAX_PENDING
    assert len(tracer.children(tracer.named("ansible run"))) == 10


def test_a_task_the_run_did_not_finish_ends_failed_with_the_run() -> None:
    tracer = RecordingTracer()
    trace = new_trace(tracer)
    trace.event(task_events("Wait", "1", T0, T0 + SECOND)[0])
    trace.end(*run_outcome(None))

    [unfinished] = tracer.children(tracer.named("ansible run"))
    assert unfinished.name == "Wait" and unfinished.error
    assert tracer.named("ansible run").error == "the run was stopped before it ended"


def test_request_spans_redact_the_names_a_run_templated_from_a_secret() -> None:
    redactor = Redactor()
    redactor.add("s3cr3t-token")
    tracer = RecordingTracer()
    trace = new_trace(tracer, redactor)
    path = "/api/v1/namespaces/team/configmaps/s3cr3t-token"
    trace.request(request(T0, path=path, name="s3cr3t-token", status=404))
    trace.end({})

    [span] = tracer.children(tracer.named("ansible run"))
    assert span.attributes["k8s.object.name"] == "<redacted>"
    assert span.attributes["url.path"] == "/api/v1/namespaces/team/configmaps/<redacted>"
    assert "s3cr3t" not in repr(tracer.spans)


@pytest.mark.parametrize(
    ("method", "fields", "expected"),
    [
        ("GET", {}, "get"),
        ("GET", {"name": ""}, "list"),
        ("GET", {"name": "", "watch": True}, "watch"),
        ("POST", {"name": ""}, "create"),
        ("PUT", {}, "update"),
        ("PATCH", {}, "patch"),
        ("DELETE", {}, "delete"),
        ("DELETE", {"name": ""}, "deletecollection"),
        ("GET", {"group": None, "path": "/version"}, "get"),
    ],
)
def test_a_request_is_named_by_its_rbac_verb(
    method: str, fields: dict[str, Any], expected: str
) -> None:
    assert verb(request(T0, method=method, **fields)) == expected


@pytest.mark.parametrize(
    ("fields", "name", "error"),
    [
        ({"group": "apps", "plural": "deployments"}, "proxy get apps/deployments", None),
        ({"subresource": "status", "method": "PATCH"}, "proxy patch configmaps/status", None),
        ({"group": None, "path": "/apis"}, "proxy get /apis", None),
        ({"status": 404}, "proxy get configmaps", None),  # the client's to judge
        ({"status": 503}, "proxy get configmaps", "HTTP 503"),
        ({"status": 0}, "proxy get configmaps", "the proxy failed before answering"),
    ],
)
def test_a_request_span_says_what_was_asked_and_fails_on_server_errors(
    fields: dict[str, Any], name: str, error: str | None
) -> None:
    record = request_record(request(T0, **fields), lambda text: text)
    assert (record.name, record.error, record.kind) == (name, error, "server")


def test_a_run_span_says_how_the_run_ended() -> None:
    summary = RunSummary()
    for event in fake.failed("Deploy", "image not found").events:
        summary.add(event)
    result = RunResult.of(summary, ident="1-x", status="failed")

    attributes, error = run_outcome(result)

    assert attributes["ansible.run.status"] == "failed" and attributes["ansible.run.failures"] == 1
    assert error is not None and "image not found" in error


def test_no_run_trace_when_tracing_is_off() -> None:
    plan = RunPlan(
        ident="1-x",
        owner=OWNER,
        described="kind=Memcached namespace=team name=mc",
        subject=Path("x"),
        role=Path("/opt/roles/memcached"),
        playbook=None,
        extravars={},
        verbosity=0,
        timeout=None,
        keep_artifacts=0,
        skip_facts=True,
    )
    assert start_run_trace(Tracing(), plan, Redactor()) is None
    tracer = RecordingTracer()
    trace = start_run_trace(Tracing(tracer), plan, Redactor())
    assert trace is not None and trace.span.attributes["ansible.role"] == "memcached"


# ----- the proxy's side: a real ApiProxy, its API server unreachable ------------


class Discovery:
    async def resource_for_plural(self, group: str, version: str, plural: str) -> Resource:
        return Resource("", "v1", "ConfigMap", "configmaps", True)


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[ApiProxy, str]]:
    proxy = ApiProxy(KubeConfig(server="http://127.0.0.1:1", ssl=False), Discovery(), port=0)  # type: ignore[arg-type]
    port = await proxy.start()
    try:
        yield proxy, f"http://127.0.0.1:{port}"
    finally:
        await proxy.stop()


async def send(url: str, token: str, method: str, path: str, **headers: str) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, url + path, headers={"Authorization": f"Bearer {token}", **headers}
        ) as answer,
    ):
        return answer.status


async def test_the_proxy_traces_each_request_of_a_traced_run_refusals_included(
    proxy: tuple[ApiProxy, str],
) -> None:
    server, url = proxy
    access = server.grant(OWNER)
    token = access.kubeconfig["users"][0]["user"]["token"]  # type: ignore[index]
    tracer = RecordingTracer()
    trace = new_trace(tracer)
    access.traced(trace)

    refused = await send(
        url, token, "GET", "/api/v1/namespaces/team/configmaps", **{"Impersonate-User": "admin"}
    )
    unreachable = await send(url, token, "DELETE", "/api/v1/namespaces/team/configmaps/mc")
    trace.end({})

    spans = tracer.children(tracer.named("ansible run"))
    assert [(span.name, span.attributes["http.response.status_code"]) for span in spans] == [
        ("proxy list configmaps", refused),
        ("proxy delete configmaps", unreachable),
    ]
    assert refused == 403 and spans[0].error is None  # a refusal is the client's doing
    assert unreachable >= 500 and spans[1].error == f"HTTP {unreachable}"
    assert all(span.kind == "server" and span.ended for span in spans)


async def test_an_untraced_run_costs_the_proxy_no_span(proxy: tuple[ApiProxy, str]) -> None:
    server, url = proxy
    token = server.grant(OWNER).kubeconfig["users"][0]["user"]["token"]  # type: ignore[index]
    assert await send(url, token, "GET", "/api/v1/namespaces/team/configmaps/mc") >= 500
    grant = server._grants.bearing(f"Bearer {token}")
    assert grant is not None and grant.trace is None
