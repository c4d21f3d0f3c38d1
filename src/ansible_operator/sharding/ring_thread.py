"""The shard ring on a thread of its own, so that its Lease is renewed however
busy the operator's event loop is (as manager/leader_thread.py does for leader
election, for the same reason: a replica that renews on a starved loop misses
its renew deadline and stops, and a busy ring would restart in a loop).

`ShardRing` (sharding/ring.py) runs on the thread's event loop with an
`ApiClient` of its own. Its decisions reach the main loop in order through
`call_soon_threadsafe`: the scope's buckets change there, and a released
bucket's drain (the controllers' reconciles in flight) runs there, the ring
waiting for it before it withdraws the bucket from its Lease. The ring keeps
its own record of what it activated, so that a change not yet applied on the
main loop is never taken for one undone. If the main loop does not take the
news that the ring is lost within a lease duration (it is wedged), the
process exits with status 1 from this thread: others may take its buckets by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import aiohttp

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.observability.metrics import Metrics
from ansible_operator.sharding.ring import Drain, LocalShare, ShardRing, replica_identity
from ansible_operator.sharding.scope import ShardedScope

log = logging.getLogger("ansible_operator.sharding")

STOP_TIMEOUT = 10.0  # seconds leaving may take before the thread is left behind


def _exit_at_once() -> None:
    os._exit(1)  # the main loop cannot run a clean exit: it does not run at all


class _MainLoopShare:
    """A `Share` whose effects run on the main loop, in the order decided."""

    def __init__(self, local: LocalShare, main: asyncio.AbstractEventLoop, on_lost: Any) -> None:
        self.local = local
        self.main = main
        self.on_lost = on_lost

    def filtering(self, server_side: bool) -> None:
        self.main.call_soon_threadsafe(self.local.filtering, server_side)

    def activate(self, buckets: frozenset[int]) -> None:
        self.main.call_soon_threadsafe(self.local.activate, buckets)

    async def release(self, buckets: frozenset[int]) -> None:
        done = asyncio.run_coroutine_threadsafe(self.local.release(buckets), self.main)
        await asyncio.wrap_future(done)

    def lose(self) -> None:
        self.main.call_soon_threadsafe(self.on_lost)


class ShardRingThread:
    """`ShardRing` on its own thread and event loop; used from the main loop."""

    def __init__(
        self,
        config: KubeConfig,
        scope: ShardedScope,
        drain: Drain,
        *,
        ring: str,
        namespace: str,
        metrics: Metrics,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        identity: str | None = None,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        on_wedged: Callable[[], None] = _exit_at_once,
    ) -> None:
        self.config = config.for_another_loop()
        self.local = LocalShare(scope, drain)
        self.ring = ring
        self.namespace = namespace
        self.metrics = metrics
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.identity = identity or replica_identity()
        self.trace_configs = trace_configs
        self.on_wedged = on_wedged
        self.lost = asyncio.Event()  # on the main loop
        self._main: asyncio.AbstractEventLoop | None = None
        self._joined: asyncio.Future[None] | None = None
        self._finished: asyncio.Future[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = threading.Event()
        self._loss_heard = threading.Event()

    async def join(self) -> None:
        """Join the ring and take a first share; the thread then keeps the Lease."""
        self._main = asyncio.get_running_loop()
        self._joined = self._main.create_future()
        self._finished = self._main.create_future()
        self._thread = threading.Thread(
            target=self._run_thread, name=f"shard-ring-{self.ring}", daemon=True
        )
        self._thread.start()
        try:
            await asyncio.shield(self._joined)
        except asyncio.CancelledError:
            self._request_stop()
            raise

    async def leave(self) -> None:
        """After this replica's reconciles have stopped: delete the Lease (unless
        the ring was lost) and wait for the thread, at most STOP_TIMEOUT."""
        self.local.activate(frozenset())
        self._request_stop()
        if self._finished is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._finished), STOP_TIMEOUT)

    # ----- the main loop's side --------------------------------------------------
    def _request_stop(self) -> None:
        self._stop_requested.set()
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop already closed
                self._loop.call_soon_threadsafe(self._stop.set)

    def _tell_main(self, callback: Callable[[], None]) -> None:
        if self._main is not None:
            with contextlib.suppress(RuntimeError):  # the main loop closed: nobody listens
                self._main.call_soon_threadsafe(callback)

    def _settle(self, future: asyncio.Future[None] | None, error: Exception | None) -> None:
        if future is None or future.done():
            return
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)

    def _lost_now(self) -> None:
        self.local.lose()
        self._loss_heard.set()
        self.lost.set()

    def _failed_now(self, error: Exception) -> None:
        """The thread died: joining fails, or a member's ring is lost."""
        if self._joined is not None and not self._joined.done():
            self._joined.set_exception(error)
        else:
            self._lost_now()

    # ----- the thread's side -----------------------------------------------------
    def _run_thread(self) -> None:
        try:
            asyncio.run(self._keep())
        except Exception as error:
            log.error(
                "shard ring failed ring=%s identity=%s", self.ring, self.identity, exc_info=True
            )
            self._tell_main(functools.partial(self._failed_now, error))
        finally:
            self._tell_main(functools.partial(self._settle, self._finished, None))

    async def _keep(self) -> None:
        # _stop before _loop: a main loop that sees _loop finds _stop too.
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop_requested.is_set():
            self._stop.set()
        assert self._main is not None
        # A request may take no longer than the renew deadline: a member that
        # cannot renew in that time stops anyway.
        async with ApiClient(
            self.config, timeout=self.renew_deadline, trace_configs=self.trace_configs
        ) as api:
            share = _MainLoopShare(self.local, self._main, self._lost_now)
            ring = ShardRing(
                api,
                share,
                ring=self.ring,
                namespace=self.namespace,
                metrics=self.metrics,
                lease_duration=self.lease_duration,
                renew_deadline=self.renew_deadline,
                retry_period=self.retry_period,
                identity=self.identity,
            )
            await ring.join()
            self._tell_main(functools.partial(self._settle, self._joined, None))
            ring.start()
            lost = asyncio.ensure_future(ring.lost.wait())
            stop = asyncio.ensure_future(self._stop.wait())
            await asyncio.wait({lost, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if ring.lost.is_set():
                await ring.leave()  # stops its tasks; the Lease is left to expire
                await self._exit_if_unheard()
                return
            lost.cancel()
            await ring.leave()

    async def _exit_if_unheard(self) -> None:
        """The main loop must stop reconciling within a lease duration of the loss."""
        heard = await asyncio.to_thread(self._loss_heard.wait, self.lease_duration)
        if not heard:
            log.error(
                "shard ring lost and the event loop has not stopped within %gs: exiting "
                "ring=%s identity=%s",
                self.lease_duration,
                self.ring,
                self.identity,
            )
            self.on_wedged()
