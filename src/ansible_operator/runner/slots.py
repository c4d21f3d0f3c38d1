"""The operator's run slots (`--max-concurrent-runs`), handed out by priority.

A reconcile's key leaves its controller's queue by priority (controller/
priorities.py), but with more workers than slots (several watches, or
`--max-concurrent-runs` below the workers) the workers then wait here, and a
first-come semaphore would put an edited object's run behind every listed
object a worker took before it. So a freed slot goes to the waiting run of
the highest priority, first come first served within a priority, and, as in
the queue, no run waits for ever: when the run let in is not the one that has
waited longest, a count goes up, and every `fair_every`-th such turn goes to
the longest-waiting run whatever its priority. The waiters are at most the
workers: a scan per slot is cheap.

A run's priority is the context's (`prioritized`, set by the controller around
a reconcile), as a run's stop is (stopping.py): the reconciler and the runner
in between need not carry it. Admission runs take no slot (plan.capped).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

FAIR_EVERY = 5  # as the queue's (controller/queue.py)

_current: ContextVar[int] = ContextVar("run_priority", default=0)


@contextlib.contextmanager
def prioritized(priority: int) -> Iterator[None]:
    """Runs started in this context wait for a slot at `priority`."""
    token = _current.set(priority)
    try:
        yield
    finally:
        _current.reset(token)


def current_priority() -> int:
    return _current.get()


@dataclass
class _Waiter:
    priority: int
    arrived: int
    granted: asyncio.Future[None]


class RunSlots:
    def __init__(self, size: int, *, fair_every: int = FAIR_EVERY) -> None:
        self.free = size
        self.fair_every = fair_every
        self._waiters: list[_Waiter] = []
        self._arrivals = itertools.count()
        self._passed = 0  # slots in a row given to a run that had not waited longest

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @contextlib.asynccontextmanager
    async def held(self, priority: int | None = None) -> AsyncIterator[None]:
        """One slot for the block; `priority`: the context's when not given."""
        await self._acquire(current_priority() if priority is None else priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: int) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        waiter = _Waiter(priority, next(self._arrivals), asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self._release()  # given a slot it will not use: the next one's
            else:
                self._waiters.remove(waiter)
            raise

    def _release(self) -> None:
        if not self._waiters:
            self.free += 1
            return
        highest = min(self._waiters, key=lambda w: (-w.priority, w.arrived))
        oldest = min(self._waiters, key=lambda w: w.arrived)
        chosen = highest
        if highest is oldest:
            self._passed = 0
        elif self._passed >= self.fair_every - 1:
            self._passed = 0
            chosen = oldest
        else:
            self._passed += 1
        self._waiters.remove(chosen)
        chosen.granted.set_result(None)  # the slot passes to it, never freed between
