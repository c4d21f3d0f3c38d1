"""OpenTelemetry traces of reconciles, off unless an OTLP endpoint is set.

    reconcile <Kind>                  the reconcile (reconciler/traced.py)
      admit, write status, ...        its steps besides the run
      ansible run                     the Ansible run (runner/host.py, run_trace.py)
        wait for the runner, ...      what it waited for before it started
        <task name>                   each task on each host, from the run's events
          proxy <verb> <resource>     each API request the task sent through the proxy

The seam between the operator and the SDK is `Tracer`: spans are started and
ended with the operator's own values (plain strings, ints, bools, times in
ns since the epoch), and `observability/otel.py` is the one module that
imports OpenTelemetry, loaded only by `from_environment` when tracing is on.
Tracing off is `OFF`, whose `tracer` is None: a reconcile, a run and a proxy
request each pay one attribute read for it, and nothing is imported.

Like logs, Events and conditions, spans carry no value a run read from a
Secret or gave to a no_log task: every text of a run's spans goes through the
run's Redactor (run_trace.py), and no span carries a task's arguments or
results, only its name, place and outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
from collections.abc import Iterator, Mapping

from ansible_operator.observability.spans import Span, Tracer

log = logging.getLogger("ansible_operator.tracing")

# Any of these set (and not OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none): on.
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


# The span of the reconcile (or other work) in progress in this task: what a run's
# span is the child of. Set by `Tracing.current_span`, read by `Tracing.current`.
_current: contextvars.ContextVar[Span | None] = contextvars.ContextVar(
    "ansible_operator_current_span", default=None
)


class Tracing:
    """The operator's tracing: `tracer` None (`OFF`) or the SDK's (otel.py)."""

    def __init__(self, tracer: Tracer | None = None) -> None:
        self.tracer = tracer

    @property
    def enabled(self) -> bool:
        return self.tracer is not None

    @staticmethod
    @contextlib.contextmanager
    def current_span(span: Span) -> Iterator[Span]:
        """`span` the current one within the block: what spans started there with
        `parent=tracing.current()` (a run's, runner/host.py) are the children of."""
        token = _current.set(span)
        try:
            yield span
        finally:
            _current.reset(token)

    @staticmethod
    def current() -> Span | None:
        return _current.get()

    async def shutdown(self) -> None:
        """Flush the spans still queued (BatchSpanProcessor) and stop exporting."""
        if self.tracer is None:
            return
        tracer, self.tracer = self.tracer, None
        try:
            # The exporter's HTTP client is synchronous: never on the event loop.
            await asyncio.to_thread(tracer.shutdown)
        except Exception:
            log.exception("tracing: flushing the last spans failed")


OFF = Tracing()


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint is set, and
    neither the SDK nor the traces exporter is switched off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def from_environment(environ: Mapping[str, str] | None = None) -> Tracing:
    """The tracing the OTEL_* environment asks for; `OFF` without an endpoint,
    and then the SDK is not imported. A configuration the SDK cannot use (an
    exporter it lacks) is logged and leaves tracing off: never a failed start."""
    environ = os.environ if environ is None else environ
    if not wanted(environ):
        return OFF
    from ansible_operator.observability import otel

    try:
        tracer = otel.OtelTracer.from_environment(environ)
    except otel.UnusableConfiguration as error:
        log.error("tracing off: %s", error)
        return OFF
    log.info("tracing on %s", tracer.describe())
    return Tracing(tracer)
