"""How late the operator's event loop runs: a watchdog thread that times a
heartbeat on it.

Everything the operator does itself (probes, event intake, the proxy, the
reconcilers) waits while one callback holds the event loop or while the loop
is starved of CPU. The watchdog asks the loop, from its own thread, to run a
heartbeat every `interval` and measures how long after the asking it ran: the
loop's lag. Every lag goes to a histogram; a lag of at least BLOCKED_AFTER
counts as blocked time. A loop blocked longer than `warn_after` is logged as
soon as the watchdog sees it (with where the loop's thread is at that moment,
which names the culprit) and again with the whole duration once the loop runs;
at most one such episode every `warn_every` seconds, the others counted.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

from ansible_operator.observability.metrics import Metrics

log = logging.getLogger("ansible_operator.loop")

BLOCKED_AFTER = 0.1  # seconds of lag that count as blocked (asyncio's own "slow callback")
WHERE_FRAMES = 3  # innermost frames of the loop's thread named in the warning


def where(thread_id: int) -> str:
    """The innermost frames of a thread, innermost first: `file:line function < ...`."""
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return "unknown"
    frames = traceback.extract_stack(frame)[-WHERE_FRAMES:]
    return " < ".join(f"{f.filename}:{f.lineno} {f.name}" for f in reversed(frames))


class LoopWatchdog:
    def __init__(
        self,
        metrics: Metrics,
        *,
        interval: float = 0.25,
        warn_after: float = 1.0,
        warn_every: float = 10.0,
    ) -> None:
        self.metrics = metrics
        self.interval = interval
        self.warn_after = warn_after
        self.warn_every = warn_every
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._warned_at = -float("inf")
        self._unreported = 0  # episodes not logged since the last warning
        self._longest = 0.0

    def start(self) -> None:
        """Watch the running loop (call from it)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(self.interval + 1.0)

    def _watch(self) -> None:
        while not self._stopping.wait(self.interval):
            lag = self._beat()
            if lag is None:
                return  # the loop closed
            self._record(lag)

    def _beat(self) -> float | None:
        """Seconds between asking the loop for a heartbeat and its running it."""
        assert self._loop is not None
        ran = threading.Event()
        ran_at: list[float] = []

        def heartbeat() -> None:
            ran_at.append(time.monotonic())
            ran.set()

        asked_at = time.monotonic()
        try:
            self._loop.call_soon_threadsafe(heartbeat)
        except RuntimeError:
            return None
        warned = False
        while not ran.wait(self.interval):
            # A stop from the loop's own thread blocks it: never wait for it here.
            if self._stopping.is_set() or self._loop.is_closed():
                return None
            if not warned and time.monotonic() - asked_at >= self.warn_after:
                self._blocked_now(asked_at)
                warned = True
        return ran_at[0] - asked_at

    def _blocked_now(self, since: float) -> None:
        if time.monotonic() - self._warned_at < self.warn_every:
            return
        log.warning(
            "event loop blocked for %.1fs so far where=%s",
            time.monotonic() - since,
            where(self._loop_thread),
        )

    def _record(self, lag: float) -> None:
        self.metrics.event_loop_lag.observe(lag)
        if lag < BLOCKED_AFTER:
            return
        self.metrics.event_loop_blocked.inc(lag)
        if lag > self._longest:
            self._longest = lag
            self.metrics.event_loop_blocked_max.set(lag)
        if lag < self.warn_after:
            return
        now = time.monotonic()
        if now - self._warned_at < self.warn_every:
            self._unreported += 1
            return
        log.warning(
            "event loop was blocked seconds=%.1f unreported_since_last=%d", lag, self._unreported
        )
        self._warned_at = now
        self._unreported = 0
