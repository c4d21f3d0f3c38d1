"""A client's malformed request to one of the operator's HTTP servers: a 400
and at most one DEBUG line, never a traceback.

aiohttp answers a request it cannot parse (a bad request line, method,
header or version, a line too long, a body whose Content-Length, chunking or
compression is broken) with a 400, then logs it as an ERROR with a
traceback; and it answers HTTP/0.9 and HTTP/2.0 request lines as if they were
HTTP/1. Anyone who can reach a port could fill the operator's log with
tracebacks that read like bugs. So each server here:

- logs through `MalformedRequestLogger`: an error raised by the client's
  bytes (aiohttp's HttpProcessingError) is one DEBUG line naming the server
  and the problem; any other error (a bug of ours) keeps its ERROR line and
  traceback;
- refuses request lines of any HTTP version but 1.0 and 1.1 (`http_1_only`).

`StrictAppRunner` is a GuardedAppRunner (http_limits.py) with both.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from aiohttp import web
from aiohttp.http import HttpProcessingError

from ansible_operator.serving.http_limits import GuardedAppRunner, Handler

SERVER_LOGGER = logging.getLogger("aiohttp.server")
HTTP_1 = ((1, 0), (1, 1))


def malformed(error: BaseException | None) -> HttpProcessingError | None:
    """What `error` says is malformed in the client's request (its line,
    headers or body), or None for any other error."""
    if isinstance(error, web.RequestPayloadError):  # a broken body, as the handler reads it
        error = error.__cause__
    return error if isinstance(error, HttpProcessingError) else None


def logged_error(exc_info: Any) -> BaseException | None:
    """The exception of logging's `exc_info` argument."""
    if exc_info is True:
        return sys.exc_info()[1]
    if isinstance(exc_info, tuple):
        return exc_info[1]
    return exc_info if isinstance(exc_info, BaseException) else None


class MalformedRequestLogger(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger for one server (its `logger` argument)."""

    def __init__(self, server: str) -> None:
        super().__init__(SERVER_LOGGER, {"server": server})
        self.server = server

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        error = malformed(logged_error(kwargs.get("exc_info")))
        if error is None:
            super().log(level, msg, *args, **kwargs)
            return
        kwargs.pop("exc_info")
        # aiohttp's message (its context, "Error handling request from %s")
        # is formatted by logging; the error's spans lines (a caret under the
        # bad byte): one line here.
        super().log(
            logging.DEBUG,
            f"http server refused a malformed request server=%s status=%s error=%r context={msg}",
            self.server,
            error.code,
            error.message,
            *args,
            **kwargs,
        )


@web.middleware
async def http_1_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    if tuple(request.version) not in HTTP_1:
        major, minor = request.version
        return web.Response(
            status=400,
            text=f"HTTP/{major}.{minor} is not served here: send HTTP/1.1\n",
            headers={"Connection": "close"},
        )
    return await handler(request)


class StrictAppRunner(GuardedAppRunner):
    """A GuardedAppRunner that refuses malformed requests quietly (see the
    module's docstring)."""

    def __init__(self, app: web.Application, name: str, **kwargs: Any) -> None:
        app.middlewares.insert(0, http_1_only)
        kwargs.setdefault("logger", MalformedRequestLogger(name))
        super().__init__(app, name, **kwargs)
