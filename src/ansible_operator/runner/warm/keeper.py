"""Keeping an operator's warm processes: started behind readiness, replaced when they exit.

The warm runner lives as long as the operator, and so meets what a long life
meets: the kernel's OOM killer under a memory limit (it and its module
interpreter are the largest processes of the Pod), a crash, a stray `kill`.
Without a successor every later run would fail to reach it until the
operator restarts, while `/healthz` still answers. So the keeper waits on
the warm runner's exit and starts another: runs under way when it died fail
and are retried by their reconciles; runs after wait for its successor, as
the first runs wait for the first. A warm runner that keeps exiting soon
after its start is restarted after a growing delay (up to a minute), so a
crash at start does not become a busy loop; if one cannot start at all, runs
fall back to reference mode (the start's own fallback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Awaitable, Callable

from ansible_operator.runner.warm.processes import WarmProcesses

log = logging.getLogger("ansible_operator.manager")

# A warm runner that lived this long did not die of its start: the next exit
# is restarted at once again.
SETTLED = 300.0
MAX_DELAY = 60.0

StartWarm = Callable[[], Awaitable[WarmProcesses | None]]


def restart_delay(quick_exits: int) -> float:
    """Seconds before starting the next warm runner, after `quick_exits`
    exits in a row each within SETTLED of its start: 0, 1, 2, 4 ... 60."""
    if quick_exits <= 1:
        return 0.0
    return min(MAX_DELAY, 2.0 ** (quick_exits - 2))


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


class WarmKeeper:
    """`start` starts the warm processes (None: they could not start, runs
    go to reference mode); `on_restart` is told of each that exited, before
    its successor starts."""

    def __init__(
        self, start: StartWarm, on_restart: Callable[[WarmProcesses], None] = lambda gone: None
    ) -> None:
        self._start = start
        self._on_restart = on_restart
        self._warming: asyncio.Task[WarmProcesses | None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._quick_exits = 0

    def begin(self) -> None:
        self._warming = asyncio.create_task(self._start_and_watch(0.0))

    async def current(self) -> WarmProcesses | None:
        """The warm processes, once started (None: never begun, or they did not start)."""
        if self._warming is None:
            return None
        return await asyncio.shield(self._warming)

    async def stop(self) -> None:
        # The watch first: the kill below is not an exit to recover from.
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if self._warming is None:
            return
        self._warming.cancel()  # a start under way kills what it started
        warm = None
        with contextlib.suppress(asyncio.CancelledError, Exception):
            warm = await self._warming
        self._warming = None
        if warm is not None:
            await warm.stop()

    async def _start_and_watch(self, delay: float) -> WarmProcesses | None:
        if delay:
            await asyncio.sleep(delay)
        warm = await self._start()
        if warm is not None:
            self._watch = asyncio.create_task(self._replace_when_gone(warm))
        return warm

    async def _replace_when_gone(self, warm: WarmProcesses) -> None:
        started = time.monotonic()
        code = await warm.process.wait()
        quick = time.monotonic() - started < SETTLED
        self._quick_exits = self._quick_exits + 1 if quick else 1
        delay = restart_delay(self._quick_exits)
        log.error(
            "the warm runner exited pid=%s (%s): runs under way fail and are retried; "
            "starting another%s",
            warm.process.pid,
            describe_exit(code),
            f" in {delay:g}s" if delay else "",
        )
        self._on_restart(warm)
        self._warming = asyncio.create_task(self._start_and_watch(delay))
