"""A Tracer (observability/spans.py) that keeps its spans in memory, for the
unit tests of what the operator traces: no SDK, no exporter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ansible_operator.observability.spans import AttributeValue, Parent
from ansible_operator.observability.trace_context import RemoteParent


@dataclass(eq=False)
class RecordedSpan:
    name: str
    parent: RecordedSpan | RemoteParent | None
    attributes: dict[str, AttributeValue]
    start_ns: int | None
    kind: str
    end_ns: int | None = None
    error: str | None = None
    ended: bool = False

    def set(self, attributes: Mapping[str, AttributeValue]) -> None:
        assert not self.ended, f"{self.name}: set after its end"
        self.attributes.update(attributes)

    def end(self, *, error: str | None = None, end_ns: int | None = None) -> None:
        assert not self.ended, f"{self.name}: ended twice"
        self.ended, self.error, self.end_ns = True, error, end_ns


@dataclass
class RecordingTracer:
    spans: list[RecordedSpan] = field(default_factory=list)
    shut: bool = False

    def start(
        self,
        name: str,
        *,
        parent: Parent | None,
        attributes: Mapping[str, AttributeValue],
        start_ns: int | None = None,
        kind: str = "internal",
    ) -> RecordedSpan:
        assert parent is None or isinstance(parent, RecordedSpan | RemoteParent), parent
        span = RecordedSpan(name, parent, dict(attributes), start_ns, kind)
        self.spans.append(span)
        return span

    def shutdown(self) -> None:
        self.shut = True

    def named(self, name: str) -> RecordedSpan:
        [span] = [span for span in self.spans if span.name == name]
        return span

    def children(self, parent: RecordedSpan) -> list[RecordedSpan]:
        return [span for span in self.spans if span.parent is parent]
