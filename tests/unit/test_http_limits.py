"""The limits every HTTP server of the operator keeps against slow or many
clients, on a real aiohttp server on loopback with small limits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from ansible_operator.serving.http_limits import (
    GuardedAppRunner,
    ServerLimits,
    quiet_accept_errors,
)

HALF_SENT = b"GET / HTTP/1.1\r\nHost: operator\r\n"  # never the blank line that ends it
WHOLE = b"GET / HTTP/1.1\r\nHost: operator\r\nConnection: close\r\n\r\n"
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@asynccontextmanager
async def server(
    limits: ServerLimits, handler: Callable[..., object] | None = None
) -> AsyncIterator[tuple[GuardedAppRunner, int]]:
    async def hello(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_route("*", "/", handler or hello)
    runner = GuardedAppRunner(app, "test", limits)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def connect(port: int, data: bytes) -> Connection:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    return reader, writer


async def answer(connection: Connection) -> bytes:
    """All the server sends before it closes the connection (b"" if nothing)."""
    reader, writer = connection
    try:
        return await asyncio.wait_for(reader.read(), 30)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


async def test_a_connection_that_never_finishes_its_headers_is_closed() -> None:
    async with server(ServerLimits(header_timeout=0.2)) as (runner, port):
        assert await answer(await connect(port, HALF_SENT)) == b""
        assert runner.guard.counts["header_timeouts"] == 1


async def test_a_request_whose_body_never_arrives_is_closed_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with server(ServerLimits(body_timeout=0.2)) as (runner, port):
        slow = b"POST / HTTP/1.1\r\nHost: operator\r\nContent-Length: 100\r\n\r\nonly this"
        assert await answer(await connect(port, slow)) == b""
        assert runner.guard.counts["body_timeouts"] == 1
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_client_that_leaves_mid_body_leaves_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with server(ServerLimits()) as (_runner, port):
        for _ in range(20):
            _, writer = await connect(
                port, b"POST / HTTP/1.1\r\nHost: operator\r\nContent-Length: 100\r\n\r\nhalf"
            )
            writer.close()
        # The server is still there, and answers.
        assert (await answer(await connect(port, WHOLE))).endswith(b"hello")
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_over_the_cap_the_connections_waiting_longest_make_room(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "ansible_operator.http")
    async with server(ServerLimits(max_connections=4)) as (runner, port):
        hogs = [await connect(port, HALF_SENT) for _ in range(40)]
        reply = await answer(await connect(port, WHOLE))
        assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b"hello")
        assert runner.guard.open <= 4
        assert runner.guard.counts["evicted"] >= 37
        # The oldest were closed; the server never held more than its cap.
        assert await answer(hogs[0]) == b""
        for hog in hogs[1:]:
            hog[1].close()
    # One line for all those evictions, and no traceback.
    records = [r for r in caplog.records if r.name == "ansible_operator.http"]
    assert len(records) == 1
    assert "http server full" in records[0].getMessage()
    assert records[0].exc_info is None


async def test_when_every_connection_is_busy_a_new_one_is_closed() -> None:
    release, both_started = asyncio.Event(), asyncio.Event()
    started: list[web.Request] = []

    async def busy(request: web.Request) -> web.Response:
        started.append(request)
        if len(started) == 2:
            both_started.set()
        await release.wait()
        return web.Response(text="done")

    async with server(ServerLimits(max_connections=2), busy) as (runner, port):
        serving = [await connect(port, WHOLE) for _ in range(2)]
        await asyncio.wait_for(both_started.wait(), 30)
        assert await answer(await connect(port, WHOLE)) == b""
        assert runner.guard.counts["refused"] == 1
        release.set()
        for connection in serving:
            assert (await answer(connection)).endswith(b"done")


async def test_a_failed_accept_is_one_line_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    quiet_accept_errors(loop)
    try:
        handler = loop.get_exception_handler()
        assert handler is not None
        for _ in range(1000):
            handler(
                loop,
                {
                    "message": "socket.accept() out of system resource",
                    "exception": OSError(24, "Too many open files"),
                },
            )
    finally:
        loop.set_exception_handler(previous)
    records = [r for r in caplog.records if r.name == "ansible_operator.http"]
    assert len(records) == 1
    assert records[0].exc_info is None
    assert "Too many open files" in records[0].getMessage()
