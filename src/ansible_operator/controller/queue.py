"""A work queue with controller-runtime's guarantees, for asyncio, and its
priority queue's ordering.

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

Priorities (controller-runtime's priority queue, with a fairness rule of ours):

- Each add carries a priority (an int, higher first) and a source (a word for
  the metrics: what queued it). Items of one priority leave in the order they
  reached it (FIFO within a level).
- An item added again keeps the highest priority it was added with: a listed
  object that is then edited moves up to the edit's level (and counts as
  having arrived there then); a lower add changes nothing. The same holds for
  a scheduled add (the earliest time, the highest priority of the adds it
  absorbed) and for the follow-up of an item added while it was processed.
- No starvation: whenever the item handed out is not the one that has waited
  longest (since it was first queued), a count goes up; the `fair_every`-th
  hand-out in a row then goes to the longest-waiting item whatever its level.
  So at least one hand-out in `fair_every` serves the oldest item, and an item
  with k items queued before it is handed out within `fair_every * (k + 1)`
  hand-outs, however many higher ones keep coming.
- Cost: O(log n) per add and per hand-out, at 10,000 queued items as at ten.
  The priority order is a heap and the age order a deque; entries an item
  left behind (raised, handed out by the other order, discarded) are skipped
  when met and the structure rebuilt once they are the majority.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections import Counter, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)

# The longest-waiting item is handed out at least once in this many hand-outs.
FAIR_EVERY = 5
# Stale entries tolerated beyond the live ones before a rebuild (amortised O(1)).
STALE_SLACK = 64


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


@dataclass(frozen=True)
class Handout(Generic[T]):
    """An item handed to a worker, and how it got there."""

    item: T
    priority: int  # the highest it was added with
    source: str  # what added it at that priority
    waited: float  # seconds since it was queued at that priority
    fair: bool  # handed out as the longest-waiting item, ahead of higher ones


@dataclass(slots=True)
class _Queued:
    priority: int
    source: str
    seq: int  # its place at this priority (FIFO within a level)
    first: int  # its place in the age order (since it was first queued)
    since: float  # when it reached this priority (loop time)


@dataclass(slots=True)
class _Scheduled:
    due: float
    priority: int
    source: str


class WorkQueue(Generic[T]):
    def __init__(
        self, name: str = "", backoff: Backoff | None = None, *, fair_every: int = FAIR_EVERY
    ) -> None:
        if fair_every < 1:
            raise ValueError("fair_every must be at least 1")
        self.name = name
        self.backoff = backoff or Backoff()
        self.fair_every = fair_every
        self._queued: dict[T, _Queued] = {}
        self._by_priority: list[tuple[int, int, T]] = []  # (-priority, seq, item), a heap
        self._by_age: deque[tuple[int, T]] = deque()  # (first, item), oldest first
        self._passed = 0  # hand-outs in a row that passed the oldest item over
        self._depth: Counter[str] = Counter()  # queued items by source
        self._processing: set[T] = set()
        self._dirty: dict[T, tuple[int, str]] = {}  # added while processed: at what
        self._waiting: list[tuple[float, int, T]] = []
        self._waiting_due: dict[T, _Scheduled] = {}
        self._sequence = itertools.count()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._shutting_down = False

    # ----- adding ------------------------------------------------------------
    def add(self, item: T, priority: int = 0, source: str = "") -> None:
        if self._shutting_down:
            return
        if self._waiting_due.pop(item, None) is not None:
            self._drop_stale_waiting()
        if item in self._processing:
            dirty = self._dirty.get(item)
            if dirty is None or priority > dirty[0]:
                self._dirty[item] = (priority, source)
            return
        now = asyncio.get_running_loop().time()
        queued = self._queued.get(item)
        if queued is not None:
            if priority > queued.priority:  # raised: it joins the end of its new level
                self._depth[queued.source] -= 1
                self._depth[source] += 1
                queued.priority, queued.source, queued.since = priority, source, now
                queued.seq = next(self._sequence)
                heapq.heappush(self._by_priority, (-priority, queued.seq, item))
                self._compact()
            return
        seq = next(self._sequence)
        self._queued[item] = _Queued(priority, source, seq, seq, now)
        self._depth[source] += 1
        heapq.heappush(self._by_priority, (-priority, seq, item))
        self._by_age.append((seq, item))
        self._wake_one()

    def add_after(self, item: T, delay: float, priority: int = 0, source: str = "") -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item, priority, source)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        current = self._waiting_due.get(item)
        if current is not None:
            if priority > current.priority:
                current.priority, current.source = priority, source
            if current.due <= due:
                return
            if current.priority > priority:
                priority, source = current.priority, current.source
        self._waiting_due[item] = _Scheduled(due, priority, source)
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
        self._waiting = [entry for entry in self._waiting if self._is_due_entry(entry)]
        heapq.heapify(self._waiting)

    def _is_due_entry(self, entry: tuple[float, int, T]) -> bool:
        scheduled = self._waiting_due.get(entry[2])
        return scheduled is not None and scheduled.due == entry[0]

    def add_rate_limited(self, item: T, priority: int = 0, source: str = "") -> float:
        delay = self.backoff.next_delay(item)
        self.add_after(item, delay, priority, source)
        return delay

    def forget(self, item: T) -> None:
        self.backoff.forget(item)

    def discard_where(self, predicate: Callable[[T], bool]) -> int:
        """Drop every item `predicate` picks from the queue, the schedule, the
        follow-ups of runs in flight and the backoff; how many were waiting."""
        queued = [item for item in self._queued if predicate(item)]
        for item in queued:
            self._depth[self._queued.pop(item).source] -= 1
        if queued:
            self._rebuild()
        scheduled = [item for item in self._waiting_due if predicate(item)]
        for item in scheduled:  # its heap entry no longer matches: never released
            del self._waiting_due[item]
        self._dirty = {item: at for item, at in self._dirty.items() if not predicate(item)}
        for item in {*queued, *scheduled}:
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
            entry = heapq.heappop(self._waiting)
            if self._is_due_entry(entry):
                scheduled = self._waiting_due.pop(entry[2])
                self.add(entry[2], scheduled.priority, scheduled.source)
        self._arm_timer()

    # ----- the two orders ------------------------------------------------------
    def _is_current(self, item: T, seq: int, *, first: bool) -> bool:
        queued = self._queued.get(item)
        return queued is not None and (queued.first if first else queued.seq) == seq

    def _highest(self) -> T:
        """The item of the highest priority that reached it first (skipping stale entries)."""
        while not self._is_current(self._by_priority[0][2], self._by_priority[0][1], first=False):
            heapq.heappop(self._by_priority)
        return self._by_priority[0][2]

    def _oldest(self) -> T:
        """The item queued first of those queued (skipping stale entries)."""
        while not self._is_current(self._by_age[0][1], self._by_age[0][0], first=True):
            self._by_age.popleft()
        return self._by_age[0][1]

    def _compact(self) -> None:
        """Rebuild the orders once the entries left behind outnumber the live ones."""
        live = len(self._queued)
        if len(self._by_priority) > 2 * live + STALE_SLACK or len(self._by_age) > (
            2 * live + STALE_SLACK
        ):
            self._rebuild()

    def _rebuild(self) -> None:
        queued = self._queued.items()
        self._by_priority = [(-entry.priority, entry.seq, item) for item, entry in queued]
        heapq.heapify(self._by_priority)
        self._by_age = deque(sorted((entry.first, item) for item, entry in queued))

    def _next(self) -> tuple[T, bool]:
        """The item to hand out now, and whether it is the fairness turn's."""
        highest, oldest = self._highest(), self._oldest()
        if highest == oldest:
            self._passed = 0
            heapq.heappop(self._by_priority)
            self._by_age.popleft()
            return highest, False
        if self._passed >= self.fair_every - 1:
            self._passed = 0
            self._by_age.popleft()
            return oldest, True
        self._passed += 1
        heapq.heappop(self._by_priority)
        return highest, False

    # ----- taking ------------------------------------------------------------
    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    async def take(self) -> Handout[T]:
        """The next item, as `Handout`; raises ShutDown once the queue is shut down."""
        loop = asyncio.get_running_loop()
        while not self._queued or self._shutting_down:
            if self._shutting_down:
                raise ShutDown  # queued items stay for the next leader or start
            getter = loop.create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                if getter.done() and not getter.cancelled():
                    self._wake_one()  # woken, and leaving: the next one takes it
                elif getter in self._getters:
                    self._getters.remove(getter)
                raise
        item, fair = self._next()
        queued = self._queued.pop(item)
        self._depth[queued.source] -= 1
        if self._queued:
            self._compact()
        else:  # drained: nothing left behind for the items gone
            self._by_priority.clear()
            self._by_age.clear()
        self._processing.add(item)
        if self._queued:
            self._wake_one()  # more for another worker
        waited = loop.time() - queued.since
        return Handout(item, queued.priority, queued.source, waited, fair)

    async def get(self) -> T:
        return (await self.take()).item

    def done(self, item: T) -> None:
        self._processing.discard(item)
        dirty = self._dirty.pop(item, None)
        if dirty is not None:
            self.add(item, *dirty)

    # ----- state -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._queued)

    def depth(self, source: str) -> int:
        """How many queued items are there by `source`'s adds (at their priority)."""
        return self._depth[source]

    @property
    def processing(self) -> int:
        return len(self._processing)

    def pending_delay(self, item: T) -> float | None:
        scheduled = self._waiting_due.get(item)
        if scheduled is None:
            return None
        return scheduled.due - asyncio.get_running_loop().time()

    async def shutdown(self) -> None:
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
