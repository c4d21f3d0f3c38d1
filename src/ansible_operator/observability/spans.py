"""What the operator asks of a tracing SDK (observability/otel.py is the one
behind it), in its own values: attributes of plain strings, ints and bools,
times in ns since the epoch, parents that are spans of ours or the caller's
(trace_context.RemoteParent). No OpenTelemetry import: tracing off loads none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ansible_operator.observability.trace_context import RemoteParent

AttributeValue = str | int | bool
Attributes = dict[str, AttributeValue]


class Span(Protocol):
    """A started span: a parent for others, ended once."""

    def set(self, attributes: Mapping[str, AttributeValue]) -> None: ...

    def end(self, *, error: str | None = None, end_ns: int | None = None) -> None:
        """`error`: the span failed, saying why (its status ERROR and description)."""
        ...


Parent = Span | RemoteParent


class Tracer(Protocol):
    def start(
        self,
        name: str,
        *,
        parent: Parent | None,
        attributes: Mapping[str, AttributeValue],
        start_ns: int | None = None,
        kind: str = "internal",
    ) -> Span:
        """A span begun now or at `start_ns`; `parent` None: a trace of its own;
        `kind` "server" for a request we serve (the proxy's), else "internal"."""
        ...

    def shutdown(self) -> None:
        """Export what is still queued, then stop (blocks: call it from a thread)."""
        ...


@dataclass(frozen=True)
class SpanRecord:
    """A span known only once it is over (a task, from its events): plain data."""

    name: str
    start_ns: int
    end_ns: int
    attributes: Attributes
    error: str | None = None
    kind: str = "internal"

    def emit(self, tracer: Tracer, parent: Parent | None) -> Span:
        span = tracer.start(
            self.name,
            parent=parent,
            attributes=self.attributes,
            start_ns=self.start_ns,
            kind=self.kind,
        )
        span.end(error=self.error, end_ns=max(self.end_ns, self.start_ns))
        return span
