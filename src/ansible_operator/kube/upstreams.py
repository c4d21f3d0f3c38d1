"""The aiohttp sessions to the API server: one per generation of the KubeConfig.

When the kubeconfig changes (kube/config.py), the next request goes to the new
server with the new TLS settings. The session it replaces is closed once the
requests still using it are answered; closing it also ends the watches open on
it, whose informers then relist from the new server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp

from ansible_operator.kube.config import KubeConfig

SessionFactory = Callable[[KubeConfig], aiohttp.ClientSession]


@dataclass
class Upstream:
    session: aiohttp.ClientSession
    server: str  # the base URL this session's TLS settings were made for
    generation: int
    users: int = 0
    retired: bool = False


class Upstreams:
    def __init__(self, config: KubeConfig, make_session: SessionFactory) -> None:
        self.config = config
        self._make_session = make_session
        self._current = self._new()
        self._switched = asyncio.Event()

    def _new(self) -> Upstream:
        return Upstream(self._make_session(self.config), self.config.server, self.config.generation)

    @property
    def latest(self) -> Upstream:
        """The newest session, without looking at the kubeconfig."""
        return self._current

    async def current(self) -> Upstream:
        """The session for the kubeconfig as it is now (read again if changed)."""
        await self.config.reload_if_changed()
        if self._current.generation != self.config.generation:
            previous, self._current = self._current, self._new()
            previous.retired = True
            if previous.users == 0:
                await previous.session.close()
            self._switched.set()
            self._switched = asyncio.Event()
        return self._current

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[Upstream]:
        """The current session, kept open until the block ends even if the
        kubeconfig changes meanwhile."""
        upstream = await self.current()
        upstream.users += 1
        try:
            yield upstream
        finally:
            upstream.users -= 1
            if upstream.retired and upstream.users == 0:
                await upstream.session.close()

    async def wait_switched(self, seconds: float) -> bool:
        """Wait up to `seconds` for a switch to a changed kubeconfig."""
        switched = self._switched
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(switched.wait(), seconds)
        return switched.is_set()

    async def close(self) -> None:
        await self._current.session.close()
