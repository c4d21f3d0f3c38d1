"""A work queue with controller-runtime's guarantees, for asyncio.

- An item is queued at most once however often it is added (deduplicated).
- An item being processed is never handed out again until `done()`: adds
  during processing mark it dirty, and it is requeued once when done, so the
  changes made during a run coalesce into one follow-up run.
- `add_after(item, delay)` schedules an add; the earliest pending time wins.
- Per-item exponential backoff for failures (`add_rate_limited`), reset by
  `forget()` after a success.
- Memory follows the live items: an item done and forgotten holds nothing; a
  delayed add that an earlier add replaced leaves a stale entry in the timer
  heap, and the heap is rebuilt once stale entries outnumber live ones.
- `discard_where(predicate)` drops items as if never added (queued, scheduled,
  or due again after their run); a run in flight finishes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


@dataclass
class Backoff:
    """Per-item exponential backoff: base * 2**failures, capped, with jitter."""

    base: float = 0.5
    cap: float = 300.0
    jitter: float = 0.1
    _failures: dict[Hashable, int] = field(default_factory=dict)

    def next_delay(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        delay = min(self.cap, self.base * (2**failures))
        return delay * (1 + random.uniform(0, self.jitter))

    def failures(self, item: Hashable) -> int:
        return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)


class ShutDown(Exception):
    """The queue was shut down; workers should exit."""


class WorkQueue(Generic[T]):
    def __init__(self, name: str = "", backoff: Backoff | None = None) -> None:
        self.name = name
        self.backoff = backoff or Backoff()
        self._queue: deque[T] = deque()
        self._queued: set[T] = set()
        self._processing: set[T] = set()
        self._dirty: set[T] = set()
        self._waiting: list[tuple[float, int, T]] = []
        self._waiting_due: dict[T, float] = {}
        self._sequence = itertools.count()
        self._ready = asyncio.Condition()
        self._timer: asyncio.TimerHandle | None = None
        self._shutting_down = False

    # ----- adding ------------------------------------------------------------
    def add(self, item: T) -> None:
        if self._shutting_down:
            return
        if self._waiting_due.pop(item, None) is not None:
            self._drop_stale_waiting()
        if item in self._processing:
            self._dirty.add(item)
            return
        if item in self._queued:
            return
        self._queued.add(item)
        self._queue.append(item)
        self._notify()

    def add_after(self, item: T, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        current = self._waiting_due.get(item)
        if current is not None and current <= due:
            return
        self._waiting_due[item] = due
        heapq.heappush(self._waiting, (due, next(self._sequence), item))
        self._drop_stale_waiting()
        self._arm_timer()

    def _drop_stale_waiting(self) -> None:
        """Rebuild the heap without the entries no longer due (replaced or
        cancelled by an add), once they are the majority: an object
        reconciled every minute with a reconcile period of hours would else
        leave one entry per reconcile until its time came."""
        if len(self._waiting) <= 2 * len(self._waiting_due):
            return
        self._waiting = [
            entry for entry in self._waiting if self._waiting_due.get(entry[2]) == entry[0]
        ]
        heapq.heapify(self._waiting)

    def add_rate_limited(self, item: T) -> float:
        delay = self.backoff.next_delay(item)
        self.add_after(item, delay)
        return delay

    def forget(self, item: T) -> None:
        self.backoff.forget(item)

    def discard_where(self, predicate: Callable[[T], bool]) -> int:
        """Drop every item `predicate` picks from the queue, the schedule, the
        follow-ups of runs in flight and the backoff; how many were waiting."""
        queued = {item for item in self._queued if predicate(item)}
        if queued:
            self._queued -= queued
            self._queue = deque(item for item in self._queue if item not in queued)
        scheduled = [item for item in self._waiting_due if predicate(item)]
        for item in scheduled:  # its heap entry no longer matches: never released
            del self._waiting_due[item]
        self._dirty = {item for item in self._dirty if not predicate(item)}
        for item in queued | set(scheduled):
            self.backoff.forget(item)
        return len(queued) + len(scheduled)

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._waiting:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(self._waiting[0][0], self._release_due)

    def _release_due(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        while self._waiting and self._waiting[0][0] <= now:
            due, _, item = heapq.heappop(self._waiting)
            if self._waiting_due.get(item) == due:
                del self._waiting_due[item]
                self.add(item)
        self._arm_timer()

    def _notify(self) -> None:
        async def wake() -> None:
            async with self._ready:
                self._ready.notify()

        asyncio.get_running_loop().create_task(wake())

    # ----- taking ------------------------------------------------------------
    async def get(self) -> T:
        async with self._ready:
            while not self._queue or self._shutting_down:
                if self._shutting_down:
                    raise ShutDown  # queued items stay for the next leader or start
                await self._ready.wait()
            item = self._queue.popleft()
            self._queued.discard(item)
            self._processing.add(item)
            return item

    def done(self, item: T) -> None:
        self._processing.discard(item)
        if item in self._dirty:
            self._dirty.discard(item)
            self.add(item)

    # ----- state -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._queue)

    @property
    def processing(self) -> int:
        return len(self._processing)

    def pending_delay(self, item: T) -> float | None:
        due = self._waiting_due.get(item)
        if due is None:
            return None
        return due - asyncio.get_running_loop().time()

    async def shutdown(self) -> None:
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
        async with self._ready:
            self._ready.notify_all()
