"""Tracing is off unless the standard OTEL_* variables name an OTLP endpoint;
off, nothing of OpenTelemetry is imported or connected to. On, a reconcile is
the root span of its trace (or the child of the caller's, from a valid
`traceparent` annotation), saying which object it was and how it ended, and
the run it makes is its child. The SDK adapter (observability/otel.py) is
checked with the SDK's in-memory exporter."""

from __future__ import annotations

import builtins
import logging
import socket
import sys
from typing import Any

import pytest
from recorded_spans import RecordingTracer
from test_reconciler import KEY, Setup, make_watch, memcached

from ansible_operator.controller.reconcile import Outcome
from ansible_operator.observability.trace_context import TRACEPARENT_ANNOTATION, RemoteParent
from ansible_operator.observability.tracing import OFF, Tracing, from_environment, wanted
from ansible_operator.runner import fake
from ansible_operator.runner.fake import FakeRunner
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.stopping import RunStopped

TRACE, SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
        (ENDPOINT, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "TRUE "}, False),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "false"}, True),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_traces_are_wanted_only_with_an_endpoint(environ: dict[str, str], on: bool) -> None:
    assert wanted(environ) is on


@pytest.fixture
def without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any import of OpenTelemetry fails, and so does any connection."""
    real_import = builtins.__import__

    def guarded(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        wanted = [name, *(f"{name}.{item}" for item in fromlist or ())]
        if any(w.startswith("opentelemetry") or w.endswith("observability.otel") for w in wanted):
            raise AssertionError(f"imported {name} {fromlist or ''} with tracing off")
        return real_import(name, globals, locals, fromlist, level)

    def refuse(*_args: Any) -> None:
        raise AssertionError("connected with tracing off")

    monkeypatch.setattr(builtins, "__import__", guarded)
    monkeypatch.delitem(sys.modules, "ansible_operator.observability.otel", raising=False)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


async def test_off_a_reconcile_imports_no_sdk_and_connects_nowhere(
    without_opentelemetry: None,
) -> None:
    with pytest.raises(AssertionError, match="with tracing off"):  # the guard guards
        from_environment(ENDPOINT)
    tracing = from_environment({"OTEL_SERVICE_NAME": "x"})
    assert tracing is OFF and not tracing.enabled
    setup = Setup(FakeRunner(fake.succeeded()), make_watch(), memcached())
    setup.reconciler.shared.tracing = tracing

    outcome = await setup.reconcile()

    assert outcome.run is not None and outcome.run.succeeded
    await tracing.shutdown()


class WatchingRunner(FakeRunner):
    """The fake runner, noting the span current while it runs (the run's parent)."""

    def __init__(self, *outcomes: fake.FakeRun) -> None:
        super().__init__(*outcomes)
        self.current: list[Any] = []

    async def run(self, plan: RunPlan) -> RunResult:
        self.current.append(Tracing.current())
        return await super().run(plan)


def traced_setup(runner: FakeRunner, **annotations: str) -> tuple[Setup, RecordingTracer]:
    tracer = RecordingTracer()
    setup = Setup(runner, make_watch(), memcached(**annotations))
    setup.reconciler.shared.tracing = Tracing(tracer)
    return setup, tracer


async def test_on_a_reconcile_is_a_span_of_its_object_and_its_run_is_its_child() -> None:
    runner = WatchingRunner(fake.succeeded())
    setup, tracer = traced_setup(runner)

    await setup.reconcile()

    span = tracer.named("reconcile Memcached")
    assert span.parent is None and span.ended and span.error is None
    assert span.attributes == {
        "k8s.object.group": "cache.example.com",
        "k8s.object.version": "v1alpha1",
        "k8s.object.kind": "Memcached",
        "k8s.namespace.name": KEY.namespace,
        "k8s.object.name": KEY.name,
        "k8s.object.uid": "1234",
        "k8s.object.generation": 3,
        "reconcile.result": "succeeded",
    }
    assert runner.current == [span]  # what the run's span is started under
    assert Tracing.current() is None  # only while the reconcile runs
    # Its steps besides the run (runner/host.py's span, not the fake's), in order.
    assert [child.name for child in tracer.children(span)] == [
        "admit",
        "write status",  # Running
        "write status",  # Successful
    ]
    assert all(child.ended and child.error is None for child in tracer.children(span))


async def test_a_traceparent_annotation_makes_the_reconcile_the_callers_child() -> None:
    setup, tracer = traced_setup(
        FakeRunner(fake.succeeded()), **{TRACEPARENT_ANNOTATION: f"00-{TRACE}-{SPAN}-01"}
    )
    await setup.reconcile()
    assert tracer.named("reconcile Memcached").parent == RemoteParent(
        int(TRACE, 16), int(SPAN, 16), True
    )


async def test_an_invalid_traceparent_starts_a_trace_of_its_own() -> None:
    setup, tracer = traced_setup(
        FakeRunner(fake.succeeded()), **{TRACEPARENT_ANNOTATION: "{{ lookup('pipe', 'id') }}"}
    )
    outcome = await setup.reconcile()
    assert outcome.run is not None and outcome.run.succeeded
    assert tracer.named("reconcile Memcached").parent is None


async def test_a_failed_reconcile_says_why_on_its_span() -> None:
    setup, tracer = traced_setup(FakeRunner(fake.failed("Deploy", "image not found")))
    await setup.reconcile()
    span = tracer.named("reconcile Memcached")
    assert span.attributes["reconcile.result"] == "failed"
    assert span.attributes["reconcile.reason"] == "Failed"
    assert span.error == "Failed: image not found"  # as the Failure condition says it
    [event] = [child for child in tracer.children(span) if child.name == "record event"]
    assert event.attributes == {"k8s.event.reason": "Failed"}


class StoppedRunner(FakeRunner):
    async def run(self, plan: RunPlan) -> RunResult:
        raise RunStopped("the object was deleted")


class BrokenRunner(FakeRunner):
    async def run(self, plan: RunPlan) -> RunResult:
        raise RuntimeError("the run directory could not be written: /secret/path")


async def test_a_stopped_or_broken_reconcile_ends_its_span_without_the_errors_text() -> None:
    setup, tracer = traced_setup(StoppedRunner())
    with pytest.raises(RunStopped):
        await setup.reconcile()
    assert tracer.named("reconcile Memcached").attributes["reconcile.result"] == "cancelled"

    setup, tracer = traced_setup(BrokenRunner())
    with pytest.raises(RuntimeError):
        await setup.reconcile()
    span = tracer.named("reconcile Memcached")
    assert (span.attributes["reconcile.result"], span.error) == ("error", "RuntimeError")


async def test_an_object_that_is_gone_makes_no_span() -> None:
    setup, tracer = traced_setup(FakeRunner())
    setup.api.objects.clear()
    assert await setup.reconcile() == Outcome()
    assert tracer.spans == []


async def test_shutdown_hands_the_tracer_its_flush_once() -> None:
    tracer = RecordingTracer()
    tracing = Tracing(tracer)
    await tracing.shutdown()
    await tracing.shutdown()
    assert tracer.shut and not tracing.enabled


# ----- the SDK behind it (observability/otel.py) --------------------------------


@pytest.fixture
def sdk() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ansible_operator.observability.otel import OtelTracer

    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracer(provider, "memory"), exporter


def test_the_sdk_continues_a_remote_trace_and_keeps_our_times_kinds_and_errors(sdk: Any) -> None:
    from opentelemetry.trace import SpanKind, StatusCode

    tracer, exporter = sdk
    root = tracer.start(
        "reconcile Memcached",
        parent=RemoteParent(int(TRACE, 16), int(SPAN, 16), True),
        attributes={"k8s.object.name": "mc"},
    )
    child = tracer.start("proxy get pods", parent=root, attributes={}, start_ns=10, kind="server")
    child.end(error="HTTP 503", end_ns=20)
    root.end()

    by_name = {span.name: span for span in exporter.get_finished_spans()}
    reconcile, request = by_name["reconcile Memcached"], by_name["proxy get pods"]
    assert reconcile.context.trace_id == int(TRACE, 16)
    assert reconcile.parent is not None and reconcile.parent.span_id == int(SPAN, 16)
    assert request.parent is not None and request.parent.span_id == reconcile.context.span_id
    assert (request.start_time, request.end_time, request.kind) == (10, 20, SpanKind.SERVER)
    assert request.status.status_code == StatusCode.ERROR
    assert request.status.description == "HTTP 503"
    assert reconcile.attributes == {"k8s.object.name": "mc"}


def test_the_sdk_records_nothing_the_caller_did_not_sample(sdk: Any) -> None:
    tracer, exporter = sdk
    span = tracer.start(
        "reconcile Memcached",
        parent=RemoteParent(int(TRACE, 16), int(SPAN, 16), False),
        attributes={},
    )
    tracer.start("ansible run", parent=span, attributes={}).end()
    span.end()
    assert exporter.get_finished_spans() == ()


def test_a_span_without_a_parent_is_a_new_trace_whatever_is_current(sdk: Any) -> None:
    from opentelemetry import trace

    tracer, exporter = sdk
    first = tracer.start("one", parent=None, attributes={})
    with trace.use_span(first.span):
        tracer.start("two", parent=None, attributes={}).end()
    first.end()
    one, two = sorted(exporter.get_finished_spans(), key=lambda span: span.name)
    assert two.parent is None and two.context.trace_id != one.context.trace_id


def test_the_service_is_named_by_the_environment_else_ansible_operator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ansible_operator.observability.otel import resource

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert resource().attributes["service.name"] == "ansible-operator"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,team=db")
    assert resource().attributes["service.name"] == "from-attributes"
    assert resource().attributes["team"] == "db"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memcached-operator")
    assert resource().attributes["service.name"] == "memcached-operator"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ("OTEL_TRACES_EXPORTER", "zipkin"),
    ],
)
def test_a_configuration_the_operator_cannot_serve_leaves_tracing_off_saying_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.ERROR, "ansible_operator.tracing"):
        assert from_environment({**ENDPOINT, variable: value}) is OFF
    assert f"{variable}={value}" in caplog.text


async def test_on_from_the_environment_and_stopped_without_a_collector_to_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:pw@127.0.0.1:1")
    for variable in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(variable, raising=False)
    tracing = from_environment()
    assert tracing.enabled
    describe = tracing.tracer.describe()  # type: ignore[attr-defined]
    assert describe == "endpoint=http://127.0.0.1:1/v1/traces protocol=http/protobuf"
    await tracing.shutdown()  # nothing queued: nothing sent
    assert not tracing.enabled


class WedgedProvider:
    """A TracerProvider whose shutdown never ends (its collector is down and the
    exporter retries for its whole timeout)."""

    def __init__(self) -> None:
        import threading

        self.released = threading.Event()

    def get_tracer(self, *_args: Any) -> None:
        return None

    def shutdown(self) -> None:
        self.released.wait()


def test_a_collector_that_is_down_does_not_hold_the_operators_exit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from ansible_operator.observability import otel

    monkeypatch.setattr(otel, "SHUTDOWN_SECONDS", 0.01)
    provider = WedgedProvider()
    tracer = otel.OtelTracer(provider, "http://collector:4318/v1/traces")  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.WARNING, "ansible_operator.tracing"):
            tracer.shutdown()  # returns, the flush given up on
        assert "the last spans were not sent" in caplog.text
    finally:
        provider.released.set()
