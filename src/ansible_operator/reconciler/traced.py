"""A reconcile as the root span of its trace (tracing on only):

    reconcile <Kind>   k8s.object.{group,version,kind,name,uid,generation},
                       k8s.namespace.name, reconcile.result (succeeded, failed,
                       skipped, cancelled, error), reconcile.reason (why it failed)
      admit, add finalizer, write status, ansible run, record event, ...
                       its steps (`step`), so where its time went outside the
                       run shows too

Its parent is the caller's span when the object carries a valid `traceparent`
annotation (a GitOps tool's sync: trace_context.py), else it starts a trace.
The run's span (runner/host.py) is its child: it is the current span while
the reconcile runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from ansible_operator.controller.reconcile import Outcome
from ansible_operator.observability.spans import Attributes, AttributeValue, Span
from ansible_operator.observability.trace_context import annotated_parent
from ansible_operator.observability.tracing import Tracing
from ansible_operator.project.watches import Watch
from ansible_operator.runner.events import bounded
from ansible_operator.runner.stopping import RunStopped

RESULT = "reconcile.result"
REASON = "reconcile.reason"
MAX_MESSAGE = 1024  # characters of a failure's message on the span (as an Event's)


class ReconcileSpan:
    """The reconcile's span, knowing whether a result was said (`failed`)."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self.result: AttributeValue | None = None
        self.error: str | None = None

    def set(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.result = attributes.get(RESULT, self.result)
        self.span.set(attributes)

    def end(self, *, error: str | None = None, end_ns: int | None = None) -> None:
        self.span.end(error=error or self.error, end_ns=end_ns)


# The reconcile in progress in this task, if traced: what `reconcile_failed` marks.
_reconciling: contextvars.ContextVar[ReconcileSpan | None] = contextvars.ContextVar(
    "ansible_operator_reconcile_span", default=None
)


def object_attributes(watch: Watch, obj: Mapping[str, Any]) -> Attributes:
    metadata = obj.get("metadata") or {}
    attributes: Attributes = {
        "k8s.object.group": watch.gvk.group,
        "k8s.object.version": watch.gvk.version,
        "k8s.object.kind": watch.gvk.kind,
        "k8s.object.name": str(metadata.get("name") or ""),
        "k8s.object.uid": str(metadata.get("uid") or ""),
    }
    if namespace := metadata.get("namespace"):
        attributes["k8s.namespace.name"] = str(namespace)
    generation = metadata.get("generation")
    if isinstance(generation, int) and not isinstance(generation, bool):
        attributes["k8s.object.generation"] = generation
    if metadata.get("deletionTimestamp"):
        attributes["reconcile.deleting"] = True
    return attributes


def outcome_result(outcome: Outcome) -> str:
    if outcome.run is not None:
        return "succeeded" if outcome.run.succeeded else "failed"
    return "skipped"  # nothing ran: the object went, or had nothing left to do


async def traced(
    tracing: Tracing,
    watch: Watch,
    obj: Mapping[str, Any],
    reconcile: Callable[[], Awaitable[Outcome]],
) -> Outcome:
    """`reconcile()` inside the reconcile's span (tracing on only)."""
    assert tracing.tracer is not None
    span = ReconcileSpan(
        tracing.tracer.start(
            f"reconcile {watch.gvk.kind}",
            parent=annotated_parent(obj),
            attributes=object_attributes(watch, obj),
        )
    )
    token = _reconciling.set(span)
    try:
        with tracing.current_span(span.span):
            outcome = await reconcile()
    except (RunStopped, asyncio.CancelledError):
        span.set({RESULT: "cancelled"})
        span.end()
        raise
    except BaseException as error:
        span.set({RESULT: "error"})
        span.end(error=type(error).__name__)  # its text may carry what spans must not
        raise
    finally:
        _reconciling.reset(token)
    if span.result is None:
        span.set({RESULT: outcome_result(outcome)})
    span.end()
    return outcome


def reconcile_failed(reason: str, message: str) -> None:
    """What the reconciler reports as a Failure, on the current reconcile's
    span (if the reconcile is traced)."""
    span = _reconciling.get()
    if span is not None:
        span.set({RESULT: "failed", REASON: reason})
        span.error = bounded(f"{reason}: {message}" if message else reason, MAX_MESSAGE)


_UNTRACED = contextlib.nullcontext()


def step(
    tracing: Tracing, name: str, **attributes: AttributeValue
) -> contextlib.AbstractContextManager[None]:
    """A step of the reconcile in progress as its child span; tracing off, a
    shared no-op (nothing is made)."""
    if tracing.tracer is None:
        return _UNTRACED
    return _step(tracing, name, attributes)


@contextlib.contextmanager
def _step(tracing: Tracing, name: str, attributes: Mapping[str, AttributeValue]) -> Iterator[None]:
    """The step's span, if a reconcile is traced here. An error ends it failed,
    naming only the exception's type."""
    tracer, parent = tracing.tracer, tracing.current()
    if tracer is None or parent is None:
        yield
        return
    span = tracer.start(name, parent=parent, attributes=attributes)
    error: str | None = None
    try:
        yield
    except BaseException as exception:
        error = type(exception).__name__
        raise
    finally:
        span.end(error=error)
