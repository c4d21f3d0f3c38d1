"""The OpenTelemetry SDK behind tracing.py's `Tracer`: the one module that
imports it, loaded only when tracing is on (tracing.from_environment).

Configured by the SDK's standard variables, read by the SDK itself: where to
send (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT +
/v1/traces), headers, timeout, compression, certificates
(OTEL_EXPORTER_OTLP_[TRACES_]*), the sampler (OTEL_TRACES_SAMPLER, default
parentbased_always_on), the batching (OTEL_BSP_*), the resource
(OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES; service.name defaults to
ansible-operator). Spans go out over OTLP/HTTP (protobuf) from the batch
processor's thread, never from the event loop.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import (
    SERVICE_NAME,
    SERVICE_VERSION,
    OTELResourceDetector,
    Resource,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from ansible_operator import __version__
from ansible_operator.observability.spans import AttributeValue, Parent
from ansible_operator.observability.trace_context import RemoteParent

DEFAULT_SERVICE_NAME = "ansible-operator"
SUPPORTED_PROTOCOL = "http/protobuf"
SHUTDOWN_SECONDS = 5.0  # how long a stop waits for the last spans to be sent
SERVER = "server"  # Tracer.start's kind for spans of requests we serve (the proxy's)

log = logging.getLogger("ansible_operator.tracing")


class UnusableConfiguration(Exception):
    """The OTEL_* variables ask for something this operator cannot do."""


class OtelSpan:
    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def set(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.span.set_attributes(attributes)

    def end(self, *, error: str | None = None, end_ns: int | None = None) -> None:
        if error is not None:
            self.span.set_status(Status(StatusCode.ERROR, error))
        self.span.end(end_time=end_ns)


class OtelTracer:
    def __init__(self, provider: TracerProvider, endpoint: str) -> None:
        self.provider = provider
        self.endpoint = endpoint
        self._tracer = provider.get_tracer("ansible_operator", __version__)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> OtelTracer:
        environ = os.environ if environ is None else environ
        for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            protocol = environ.get(variable, "").strip()
            if protocol:
                if protocol != SUPPORTED_PROTOCOL:
                    raise UnusableConfiguration(
                        f"{variable}={protocol}: this operator sends OTLP over HTTP only "
                        f"({SUPPORTED_PROTOCOL}); use the collector's HTTP port (4318)"
                    )
                break
        exporters = [
            name.strip()
            for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
            if name.strip()
        ]
        if any(name != "otlp" for name in exporters):
            raise UnusableConfiguration(
                f"OTEL_TRACES_EXPORTER={environ['OTEL_TRACES_EXPORTER']}: "
                "this operator exports traces over OTLP only (otlp, or none for no traces)"
            )
        exporter = OTLPSpanExporter()  # endpoint, headers, TLS, timeout: its OTEL_* variables
        # The SDK's own atexit handler would wait up to 30 s for an unreachable
        # collector: the manager flushes on stop instead, within SHUTDOWN_SECONDS.
        provider = TracerProvider(resource=resource(), shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider, exporter._endpoint)

    def describe(self) -> str:
        return f"endpoint={without_credentials(self.endpoint)} protocol={SUPPORTED_PROTOCOL}"

    def start(
        self,
        name: str,
        *,
        parent: Parent | None,
        attributes: Mapping[str, AttributeValue],
        start_ns: int | None = None,
        kind: str = "internal",
    ) -> OtelSpan:
        span = self._tracer.start_span(
            name,
            context=_context(parent),
            kind=SpanKind.SERVER if kind == SERVER else SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start_ns,
            record_exception=False,
            set_status_on_exception=False,
        )
        return OtelSpan(span)

    def shutdown(self) -> None:
        """Send what is queued and stop, for at most SHUTDOWN_SECONDS: a collector
        that is down must not hold the operator's exit (the SDK's exporter retries
        for its whole timeout). On a daemon thread, which an exit does not wait for."""
        stopping = threading.Thread(
            target=self.provider.shutdown, name="tracing-shutdown", daemon=True
        )
        stopping.start()
        stopping.join(SHUTDOWN_SECONDS)
        if stopping.is_alive():
            log.warning(
                "tracing: the last spans were not sent within %ss %s",
                SHUTDOWN_SECONDS,
                self.describe(),
            )


def _context(parent: Parent | None) -> Context:
    """The context a span starts in: its parent's, or an empty one (a new trace,
    whatever OpenTelemetry's own current span is)."""
    if parent is None:
        return Context()
    if isinstance(parent, RemoteParent):
        remote = SpanContext(
            trace_id=parent.trace_id,
            span_id=parent.span_id,
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT),
        )
        return trace.set_span_in_context(NonRecordingSpan(remote), Context())
    assert isinstance(parent, OtelSpan)
    return trace.set_span_in_context(parent.span, Context())


def resource() -> Resource:
    """OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, else service.name
    ansible-operator; service.version ours unless given."""
    given = OTELResourceDetector().detect().attributes
    ours: dict[str, str] = {}
    if SERVICE_NAME not in given:
        ours[SERVICE_NAME] = DEFAULT_SERVICE_NAME
    if SERVICE_VERSION not in given:
        ours[SERVICE_VERSION] = __version__
    # Resource.create merges the detected attributes first and these over them.
    return Resource.create(ours)


def without_credentials(url: str) -> str:
    """A URL as it may be logged: without a user or password in it."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
