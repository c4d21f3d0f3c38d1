"""Watches whose kind the API server does not serve (yet: its CRD is not installed).

Served kinds start at once; these wait, and are looked for again together: one
discovery per look, whatever their number, the looks spaced by exponential
backoff (10s, doubling, at most 5 minutes). A discovery made meanwhile for
another reason (a run asking the proxy about a kind it has never seen) is used
as well. A kind that appears gets its watch started, without a restart; the
backoff then starts over, since CRDs tend to arrive together (a chart, a bundle).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ansible_operator.kube.client import ApiError
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.types import Resource
from ansible_operator.project.watches import Watch

log = logging.getLogger("ansible_operator.manager")

FIRST_LOOK = 10.0  # seconds from start-up to the first look again
LONGEST_LOOK = 300.0  # the backoff's cap

StartWatch = Callable[[Watch, Resource], Awaitable[None]]


def describe(watch: Watch) -> str:
    gvk = watch.gvk
    return f"kind={gvk.kind} group={gvk.group} version={gvk.version}"


class UnservedKinds:
    def __init__(
        self,
        mapper: RestMapper,
        watches: list[Watch],
        start_watch: StartWatch,
        *,
        first_look: float = FIRST_LOOK,
        longest_look: float = LONGEST_LOOK,
    ) -> None:
        self.mapper = mapper
        self.waiting = list(watches)
        self.start_watch = start_watch
        self.first_look = first_look
        self.longest_look = longest_look

    def report(self) -> None:
        """One line per kind, once: the looks that follow are silent until it appears."""
        for watch in self.waiting:
            log.warning(
                "not watching %s: the API server does not serve it (is its CRD installed?); "
                "looking again in %.0fs, then less and less often (at most every %.0fs); "
                "the other watches are served",
                describe(watch),
                self.first_look,
                self.longest_look,
            )

    async def run(self) -> None:
        delay = self.first_look
        while self.waiting:
            appeared = await self._look_after(delay)
            delay = self.first_look if appeared else min(delay * 2, self.longest_look)
            if self.waiting:
                log.debug(
                    "kinds still not served count=%d next look in=%.0fs", len(self.waiting), delay
                )

    async def _look_after(self, delay: float) -> bool:
        """Wait `delay`, then discover once; a discovery made meanwhile by
        someone else is looked at on the way. True when a kind appeared."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        seen = self.mapper.refreshes
        while (remaining := deadline - loop.time()) > 0:
            if await self.mapper.wait_refreshed(seen, remaining):
                seen = self.mapper.refreshes
                if await self._start_served():
                    return True
        try:
            await self.mapper.refresh()
        except ApiError as error:
            log.warning(
                "discovery failed, kinds still waiting count=%d error=%s", len(self.waiting), error
            )
            return False
        return await self._start_served()

    async def _start_served(self) -> bool:
        started = False
        for watch in list(self.waiting):
            gvk = watch.gvk
            resource = self.mapper.known(gvk.group, gvk.version, gvk.kind)
            if resource is None:
                continue
            try:
                await self.start_watch(watch, resource)
            except ApiError as error:
                log.warning("cannot start watch yet %s error=%s", describe(watch), error)
                continue
            self.waiting.remove(watch)
            log.info("now watching %s: the API server serves it", describe(watch))
            started = True
        return started
