"""Limits every HTTP server of the operator puts on its clients.

The API proxy, the event receiver and the health and metrics servers are all
aiohttp servers. Left as they come, a client that opens connections and never
finishes a request (slowloris) holds each of them for an hour or more, and enough of
them use up the operator's open files: no run can start, /healthz cannot
accept, and every refused accept logs a traceback. So each server here:

- gives a connection `header_timeout` to send whole request headers, counted
  from its start or from the end of its previous response (an idle keep-alive
  connection is closed after as long, which clients reconnect from), and a
  request `body_timeout` for its body, then closes it;
- keeps at most `cap` connections open, a share of the open-file limit. A new
  connection over the cap closes the one that has waited longest for a request,
  those that never sent a whole request first; only when every connection is
  busy serving a request is the new one closed instead;
- logs what it closes as one warning line per server at most every
  LOG_INTERVAL seconds, with running counts; never a traceback per connection
  (`quiet_accept_errors` does the same for asyncio's failed accepts).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger("ansible_operator.http")

HEADER_TIMEOUT = 10.0  # seconds; as Go servers' usual ReadHeaderTimeout
BODY_TIMEOUT = 60.0  # seconds; the largest body (64 MiB) takes under a second on loopback
LINGERING_TIME = 1.0  # seconds
LOG_INTERVAL = 10.0  # seconds between two warnings of one server
SHARE_OF_OPEN_FILES = 8  # each server may hold 1/8 of the open-file limit
MIN_CONNECTIONS = 32
MAX_CONNECTIONS = 4096
# The soft open-file limit raised to (at most): plenty for the caps above and
# for runs, and modest for children that close every descriptor up to it.
NOFILE_WANTED = 1 << 16

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ServerLimits:
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    max_connections: int | None = None  # None: a share of the open-file limit


def open_file_limit() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return NOFILE_WANTED if soft == resource.RLIM_INFINITY else soft


def connection_cap(open_files: int) -> int:
    """Connections one server may hold: its share of the open files, so that
    runs, API clients and the other servers keep the rest."""
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, open_files // SHARE_OF_OPEN_FILES))


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, or NOFILE_WANTED if
    lower (1024 is a common soft default, far below what the hard limit
    allows); (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = NOFILE_WANTED if hard == resource.RLIM_INFINITY else min(hard, NOFILE_WANTED)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):  # e.g. macOS caps the soft limit below "unlimited"
        return soft, soft
    return soft, wanted


class ThrottledWarning:
    """At most one warning line per `interval`; the lines held back show up
    in the running counts of the next one."""

    def __init__(self, logger: logging.Logger, interval: float = LOG_INTERVAL) -> None:
        self.logger = logger
        self.interval = interval
        self._last: float | None = None

    def warning(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        self.logger.warning(message, *args)


class ConnectionGuard:
    """The connections of one server: each one fresh (no request yet), idle
    (between requests) or busy (a request being served)."""

    def __init__(self, name: str, limits: ServerLimits) -> None:
        self.name = name
        self.limits = limits
        self._fresh: dict[RequestHandler, asyncio.TimerHandle] = {}
        self._idle: dict[RequestHandler, asyncio.TimerHandle] = {}
        self._busy: set[RequestHandler] = set()
        self.counts = {"evicted": 0, "refused": 0, "header_timeouts": 0, "body_timeouts": 0}
        self._full_warning = ThrottledWarning(log)
        self._body_warning = ThrottledWarning(log)

    @property
    def open(self) -> int:
        return len(self._fresh) + len(self._idle) + len(self._busy)

    @property
    def cap(self) -> int:
        # Read at each connection: whoever lowers the limit (prlimit) is heeded.
        return self.limits.max_connections or connection_cap(open_file_limit())

    def attach(self, server: web.Server) -> None:
        """Hear of each connection `server` opens and loses: aiohttp's protocol
        reports both to these two methods of its server, its only such hook."""
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
            made(handler, transport)
            self.opened(handler)

        def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
            self.closed(handler)
            lost(handler, exc)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]

    # ----- connection states ---------------------------------------------------
    def opened(self, handler: RequestHandler) -> None:
        if self.open >= self.cap:
            victim = next(iter(self._fresh), None) or next(iter(self._idle), None)
            if victim is None:
                self.counts["refused"] += 1
                self._say("every connection is busy, closed the new one")
                handler.force_close()
                return
            self._forget(victim)
            victim.force_close()
            self.counts["evicted"] += 1
            self._say("closed the connection that waited longest for a request")
        self._wait(handler, self._fresh)

    def request_started(self, handler: RequestHandler) -> None:
        if self._forget(handler):
            self._busy.add(handler)

    def request_finished(self, handler: RequestHandler) -> None:
        if handler in self._busy:  # not if the connection is gone meanwhile
            self._busy.discard(handler)
            self._wait(handler, self._idle)

    def closed(self, handler: RequestHandler) -> None:
        self._forget(handler)

    def _wait(self, handler: RequestHandler, bucket: dict[RequestHandler, Any]) -> None:
        loop = asyncio.get_running_loop()
        bucket[handler] = loop.call_later(self.limits.header_timeout, self._expire, handler)

    def _forget(self, handler: RequestHandler) -> bool:
        timer = self._fresh.pop(handler, None) or self._idle.pop(handler, None)
        if timer is not None:
            timer.cancel()
            return True
        if handler in self._busy:
            self._busy.discard(handler)
            return True
        return False

    def _expire(self, handler: RequestHandler) -> None:
        # Also how idle keep-alive connections end: normal, so not logged.
        if self._forget(handler):
            self.counts["header_timeouts"] += 1
            handler.force_close()

    def _say(self, what: str) -> None:
        self._full_warning.warning(
            "http server full, %s server=%s open=%d cap=%d evicted=%d refused=%d",
            what,
            self.name,
            self.open,
            self.cap,
            self.counts["evicted"],
            self.counts["refused"],
        )

    # ----- requests ------------------------------------------------------------
    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        protocol = request.protocol
        self.request_started(protocol)
        deadline = None
        if request.body_exists:
            loop = asyncio.get_running_loop()
            deadline = loop.call_later(self.limits.body_timeout, self._body_deadline, request)
        try:
            return await handler(request)
        except ConnectionResetError:
            if request.transport is not None and not request.transport.is_closing():
                raise
            # The client is gone, or was cut off above: no one to answer, and
            # nothing to log (aiohttp would log a traceback per connection).
            return web.Response(status=400)
        finally:
            if deadline is not None:
                deadline.cancel()
            self.request_finished(protocol)

    def _body_deadline(self, request: web.Request) -> None:
        if request.content.is_eof():
            return  # the whole body is in; the handler may take its time
        self.counts["body_timeouts"] += 1
        self._body_warning.warning(
            "http request body too slow, closed the connection server=%s body_timeouts=%d",
            self.name,
            self.counts["body_timeouts"],
        )
        request.protocol.force_close()


class GuardedAppRunner(web.AppRunner):
    """An AppRunner whose server keeps `limits` (see the module's docstring)."""

    def __init__(
        self,
        app: web.Application,
        name: str,
        limits: ServerLimits | None = None,
        **kwargs: Any,
    ) -> None:
        self.guard = ConnectionGuard(name, limits or ServerLimits())
        app.middlewares.insert(0, self.guard.middleware)
        kwargs.setdefault("access_log", None)
        # aiohttp's own keep-alive timer: the same bound, where its version has one.
        kwargs.setdefault("keepalive_timeout", self.guard.limits.header_timeout)
        # A body the handler did not read (a 401) is read and dropped this
        # long, so the client sees the answer; not aiohttp's 10 seconds.
        kwargs.setdefault("lingering_time", LINGERING_TIME)
        super().__init__(app, **kwargs)

    async def setup(self) -> None:
        await super().setup()
        assert self.server is not None
        self.guard.attach(self.server)
        quiet_accept_errors(asyncio.get_running_loop())


class _QuietAcceptErrors:
    """The loop's exception handler, but a failed accept (no file descriptor
    left: asyncio retries a second later) is one throttled line, no traceback."""

    def __init__(self, previous: Callable[..., object] | None) -> None:
        self.previous = previous
        self.warning = ThrottledWarning(log)
        self.failures = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            self.failures += 1
            self.warning.warning(
                "http server cannot accept connections error=%r failures=%d",
                str(context.get("exception", "")),
                self.failures,
            )
            return
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    current = loop.get_exception_handler()
    if not isinstance(current, _QuietAcceptErrors):
        loop.set_exception_handler(_QuietAcceptErrors(current))
