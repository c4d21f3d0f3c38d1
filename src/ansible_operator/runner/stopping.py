"""Stopping a reconcile's run from outside the task that awaits it, because
what it works for is gone (its object was deleted).

    controller: RunStop per object in reconcile, made current around it
        --stop.request(reason)--> execute kills the run (as a timeout does)
        --RunStopped--> back through the reconciler to the controller

A context variable carries it, so the reconciler and the runner in between
need not: they see an exception, never a result to report, and so write no
status and no Event about an object that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar


class RunStopped(Exception):
    """A run was stopped on request; nothing about it is to be reported on its object."""

    def __init__(self, reason: str, ident: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.ident = ident  # the run stopped ("": stopped before it started)


class RunStop:
    """The request to stop the runs of one reconcile, once made."""

    def __init__(self) -> None:
        self.reason = ""
        self._requested = asyncio.Event()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def request(self, reason: str) -> None:
        if not self.requested:
            self.reason = reason
            self._requested.set()

    async def wait(self) -> None:
        await self._requested.wait()


_current: ContextVar[RunStop | None] = ContextVar("run_stop", default=None)


@contextlib.contextmanager
def stoppable(stop: RunStop) -> Iterator[RunStop]:
    """Runs started in this context stop when `stop` is requested."""
    token = _current.set(stop)
    try:
        yield stop
    finally:
        _current.reset(token)


def current() -> RunStop | None:
    """The stop of the reconcile this code runs for (None: nothing stops it but
    its own end, its timeout or shutdown: an admission run, a test)."""
    return _current.get()
