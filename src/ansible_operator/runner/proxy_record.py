"""What the API proxy saw of a run, each thing with the wall-clock time it
happened, for the run's events to tell which task it belongs to: a task's
result event carries the task's `start` and `end`, and what the proxy saw
between them came from that task's requests. Plain data, shared by the
proxy (which adds) and the run's event fold (which reads)."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")
# Things a run's record keeps (a role looping over thousands of requests says
# no more with the rest).
MAX_RECORDED = 100
# Seconds either side of a task's times (each rounded to the microsecond).
SLACK = 0.01


@dataclass
class Timeline(Generic[T]):
    seen: list[tuple[float, T]] = field(default_factory=list)

    def add(self, item: T, at: float | None = None) -> None:
        if len(self.seen) < MAX_RECORDED:
            self.seen.append((time.time() if at is None else at, item))

    def between(self, start: object, end: object) -> list[T]:
        """What came while a task ran (its event's `start` and `end`, ISO times);
        everything when the task's times are not known."""
        begun, ended = moment(start), moment(end)
        if begun is None or ended is None:
            return [item for _, item in self.seen]
        return [item for at, item in self.seen if begun - SLACK <= at <= ended + SLACK]


def moment(value: object) -> float | None:
    """A time as ansible-runner's events give it (ISO text, or a datetime)."""
    if isinstance(value, datetime.datetime):
        when = value
    elif isinstance(value, str) and value:
        try:
            when = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()
