"""A stand-in address for the API server: plain HTTP on a loopback port of its
own, every request forwarded (watches streamed) to the real server with the
admin's credentials, and recorded. `close()` makes the address refuse
connections and cuts those open, as a stopped API server's would."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from yarl import URL

from ansible_operator.kube.config import load_config
from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}
)
OPERATOR_AGENT = "ansible-operator/"  # the operator's own requests (runs' come through its proxy)


@dataclass(frozen=True)
class Recorded:
    at: float  # time.monotonic()
    method: str
    path: str
    user_agent: str

    @property
    def operators_discovery(self) -> bool:
        """A discovery by the operator itself: `GET /api`, where each of its
        discoveries starts (then `/apis` and one request per group version)."""
        return (
            self.method == "GET"
            and self.path.rstrip("/") == "/api"
            and self.user_agent.startswith(OPERATOR_AGENT)
        )


class ApiServerRelay:
    def __init__(self, kubeconfig: Path) -> None:
        self.upstream = load_config(kubeconfig)
        self.requests: list[Recorded] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._handlers: set[asyncio.Task[object]] = set()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> ApiServerRelay:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig naming this address (no credentials: the relay has them)."""
        return write_kubeconfig(path, build_kubeconfig(f"http://127.0.0.1:{self.port}"))

    def close(self) -> None:
        """The address goes dead: connections refused, those open cut."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(30)

    def stop(self) -> None:
        self.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> int:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.upstream.ssl),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _close(self) -> None:
        assert self._runner is not None and self._session is not None
        runner, self._runner = self._runner, None
        for handler in list(self._handlers):
            handler.cancel()
        await runner.cleanup()
        await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        self.requests.append(
            Recorded(
                time.monotonic(),
                request.method,
                request.rel_url.path,
                request.headers.get("User-Agent", ""),
            )
        )
        try:
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
            url = URL(self.upstream.server.rstrip("/") + request.rel_url.raw_path_qs, encoded=True)
            async with self._session.request(
                request.method,
                url,
                headers=headers,
                data=await request.read() or None,
                allow_redirects=False,
            ) as answer:
                response = web.StreamResponse(
                    status=answer.status,
                    headers={
                        k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP
                    },
                )
                await response.prepare(request)
                async for chunk in answer.content.iter_any():
                    await response.write(chunk)
                with contextlib.suppress(ConnectionError):
                    await response.write_eof()
                return response
        finally:
            self._handlers.discard(handler)
