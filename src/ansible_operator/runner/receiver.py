"""The event receiver: an aiohttp server on a private unix socket.

Each run POSTs its runner events here (see event_plugin), and osdk_metric posts
user metrics. A request is routed to its run by the run's secret token; an
unknown or finished run's token gets 401. The socket lives in a 0700
directory, so only the operator's user can connect at all.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from ansible_operator.serving.http_limits import GuardedAppRunner
from ansible_operator.serving.http_malformed import StrictAppRunner

log = logging.getLogger("ansible_operator.runner")

EventSink = Callable[[dict[str, Any]], None]
MetricSink = Callable[[dict[str, Any]], None]


@dataclass
class RunChannel:
    """Where one run's events go, while the run lives."""

    token: str
    on_event: EventSink
    label: str = ""
    received: int = 0
    statuses: list[str] = field(default_factory=list)


class EventReceiver:
    def __init__(self, socket_path: Path, on_metric: MetricSink | None = None) -> None:
        self.socket_path = socket_path
        self._channels: dict[str, RunChannel] = {}
        self._on_metric = on_metric
        self._runner: GuardedAppRunner | None = None

    # ----- run registration --------------------------------------------------
    def open_channel(self, on_event: EventSink, label: str = "") -> RunChannel:
        channel = RunChannel(token=secrets.token_urlsafe(32), on_event=on_event, label=label)
        self._channels[channel.token] = channel
        return channel

    def close_channel(self, channel: RunChannel) -> None:
        self._channels.pop(channel.token, None)

    # ----- server ------------------------------------------------------------
    async def start(self) -> None:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.parent.chmod(0o700)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/events", self._events)
        app.router.add_post("/status", self._status)
        app.router.add_post("/metrics", self._metrics)
        self._runner = StrictAppRunner(app, "events")
        await self._runner.setup()
        site = web.UnixSite(self._runner, str(self.socket_path))
        await site.start()
        self.socket_path.chmod(0o600)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def _channel(self, request: web.Request) -> RunChannel | None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self._channels.get(token)

    async def _read_json(self, request: web.Request) -> Any:
        try:
            return json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            return None

    async def _events(self, request: web.Request) -> web.Response:
        """One event (a JSON object) or several in their order (an array of them)."""
        channel = self._channel(request)
        if channel is None:
            return web.Response(status=401, text="unknown or finished run\n")
        payload = await self._read_json(request)
        events = payload if isinstance(payload, list) else [payload]
        if not all(isinstance(event, dict) for event in events):
            return web.Response(
                status=400, text="body must be a JSON object or an array of objects\n"
            )
        for event in events:
            channel.received += 1
            try:
                channel.on_event(event)
            except Exception:
                log.exception(
                    "event handler failed run=%s event=%s", channel.label, event.get("event")
                )
        return web.Response(status=204)

    async def _status(self, request: web.Request) -> web.Response:
        channel = self._channel(request)
        if channel is None:
            return web.Response(status=401, text="unknown or finished run\n")
        payload = await self._read_json(request)
        status = payload.get("status", "") if isinstance(payload, dict) else ""
        channel.statuses.append(str(status))
        return web.Response(status=204)

    async def _metrics(self, request: web.Request) -> web.Response:
        channel = self._channel(request)
        if channel is None:
            return web.Response(status=401, text="unknown or finished run\n")
        payload = await self._read_json(request)
        if not isinstance(payload, dict):
            return web.Response(status=400, text="body must be a JSON object\n")
        if self._on_metric is None:
            return web.Response(status=503, text="user metrics are not enabled\n")
        # As the Go operator answers osdk_metric: 200 and no body, or 400 and
        # the reason (plus a newline, as Go's http.Error writes it), which
        # the module reports as its msg.
        try:
            self._on_metric(payload)
        except ValueError as error:
            return web.Response(status=400, text=f"{error}\n")
        return web.Response(status=200)
