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
- serves TLS (`GuardedSite`) with the handshake under the same `header_timeout`,
  and counts a connection from its accept, handshake included: a client that
  connects and never sends a ClientHello holds a file like any other;
- keeps at most `cap` connections open, its share of the open-file budget
  (`file_budget`: half the limit kept for runs, API clients and warm processes,
  the rest split evenly between the operator's listeners, so no listener can
  starve the others). A new connection over the cap closes the one that has
  waited longest for a request, those still in their handshake first, then those
  that never sent a whole request; only when every connection is busy serving a
  request is the new one closed instead;
- logs what it closes as one warning line per server at most every
  LOG_INTERVAL seconds, with running counts; never a traceback per connection
  (`quiet_accept_errors` does the same for asyncio's failed accepts).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
import time
from asyncio import sslproto
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
# Of the open-file limit, the share no listener may take: runs (their pipes, sockets
# and files), the API clients, the warm processes, logs.
RESERVED_SHARE = 0.5
# The servers one operator may run: the API proxy, the event receiver, health,
# metrics, the webhook server with its own proxy and event receiver, one spare.
LISTENERS = 8
MIN_CONNECTIONS = 16
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


@dataclass(frozen=True)
class FileBudget:
    """How the open-file limit is split: a reserve no listener may use, and an
    equal share of the rest per listener."""

    open_files: int
    reserved: int
    per_listener: int

    def describe(self) -> str:
        return (
            f"open_files={self.open_files} reserved={self.reserved} "
            f"listeners={LISTENERS} per_listener={self.per_listener}"
        )


def file_budget(open_files: int) -> FileBudget:
    reserved = int(open_files * RESERVED_SHARE)
    share = (open_files - reserved) // LISTENERS
    return FileBudget(open_files, reserved, max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, share)))


def connection_cap(open_files: int) -> int:
    """Connections one server may hold: its share of the open files, so that
    runs, API clients and the other servers keep the rest."""
    return file_budget(open_files).per_listener


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

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._last: float | None = None

    def warning(self, message: str, *args: Any) -> None:
        now = self.clock()
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
        # TLS connections accepted, handshake not done: their raw transports.
        self._handshaking: dict[RequestHandler, asyncio.BaseTransport] = {}
        self._fresh: dict[RequestHandler, asyncio.TimerHandle] = {}
        self._idle: dict[RequestHandler, asyncio.TimerHandle] = {}
        self._busy: set[RequestHandler] = set()
        self.counts = {
            "evicted": 0,
            "refused": 0,
            "unfinished_handshakes": 0,
            "header_timeouts": 0,
            "body_timeouts": 0,
        }
        self._full_warning = ThrottledWarning(log)
        self._body_warning = ThrottledWarning(log)

    @property
    def open(self) -> int:
        return len(self._handshaking) + len(self._fresh) + len(self._idle) + len(self._busy)

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

    def tls_protocol(self, handler: RequestHandler, context: ssl.SSLContext) -> asyncio.Protocol:
        """The TLS layer in front of `handler` for one accepted connection."""
        return _GuardedTls(self, handler, context)

    # ----- connection states ---------------------------------------------------
    def handshake_started(self, handler: RequestHandler, transport: asyncio.BaseTransport) -> bool:
        """A TLS connection accepted; False: closed at once, every connection being busy."""
        if not self._make_room():
            transport.abort()
            return False
        self._handshaking[handler] = transport
        return True

    def connection_gone(self, handler: RequestHandler) -> None:
        """The TLS layer's connection is closed, its handshake done or not."""
        if self._handshaking.pop(handler, None) is not None:
            # Timed out (header_timeout), refused by TLS, or evicted: never logged.
            self.counts["unfinished_handshakes"] += 1

    def opened(self, handler: RequestHandler) -> None:
        """A connection ready for requests (a TLS one: its handshake done, already counted)."""
        if self._handshaking.pop(handler, None) is None and not self._make_room():
            handler.force_close()
            return
        self._wait(handler, self._fresh)

    def _make_room(self) -> bool:
        """Room for one more connection, closing the one that waited longest for a
        request if need be; False when every connection is busy."""
        if self.open < self.cap:
            return True
        if self._handshaking:
            victim, transport = next(iter(self._handshaking.items()))
            del self._handshaking[victim]
            transport.abort()
        else:
            waiting = next(iter(self._fresh), None) or next(iter(self._idle), None)
            if waiting is None:
                self.counts["refused"] += 1
                self._say("every connection is busy, closed the new one")
                return False
            self._forget(waiting)
            waiting.force_close()
        self.counts["evicted"] += 1
        self._say("closed the connection that waited longest for a request")
        return True

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


class _GuardedTls(sslproto.SSLProtocol):
    """asyncio's own TLS layer (what `create_server(ssl=...)` puts in front of each
    connection) with the handshake timed by `header_timeout`, that tells the guard of
    the connection from its accept: one that never finishes its handshake is
    counted, and closed, as one that never finishes its headers."""

    def __init__(
        self, guard: ConnectionGuard, handler: RequestHandler, context: ssl.SSLContext
    ) -> None:
        super().__init__(
            asyncio.get_running_loop(),
            handler,
            context,
            None,
            server_side=True,
            ssl_handshake_timeout=guard.limits.header_timeout,
        )
        self._guard = guard
        self._handler = handler

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._guard.handshake_started(self._handler, transport):
            super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.connection_gone(self._handler)
        super().connection_lost(exc)


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
        if self.guard.limits.max_connections is None:
            log.info(
                "http server connection budget server=%s cap=%d %s",
                self.guard.name,
                self.guard.cap,
                file_budget(open_file_limit()).describe(),
            )


class GuardedSite(web.BaseSite):
    """A TCP site of a GuardedAppRunner. With `tls`, each connection is counted
    against the cap from its accept and its handshake has `header_timeout`
    (aiohttp's TCPSite leaves the handshake to asyncio: uncounted, and 60 seconds)."""

    def __init__(
        self,
        runner: GuardedAppRunner,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
        backlog: int = 128,
    ) -> None:
        super().__init__(runner, backlog=backlog)
        self._guard = runner.guard
        self._host, self._port, self._tls = host, port, tls
        self.bound: tuple[str, int] = (host, port)

    @property
    def name(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self._host}:{self.bound[1]}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        tls, guard = self._tls, self._guard

        def protocol() -> asyncio.Protocol:
            handler = server()
            return handler if tls is None else guard.tls_protocol(handler, tls)

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            protocol, self._host, self._port, backlog=self._backlog
        )
        sockets = self._server.sockets
        if sockets:
            self.bound = sockets[0].getsockname()[:2]


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
