"""The shard ring on a thread of its own (kube/lease_thread.py, as leader
election), so that its Lease is renewed however busy the operator's event loop
is: a replica that renewed on a starved loop would miss its renew deadline and
stop, and a busy ring would restart in a loop.

`ShardRing` (sharding/ring.py) runs on the thread's event loop with an
`ApiClient` of its own. Its decisions reach the main loop in order through
`call_soon_threadsafe`: the share's buckets change there, and a released
bucket's drain (the controllers' reconciles in flight) runs there, the ring
waiting for it before it withdraws the bucket from its Lease. The ring keeps
its own record of what it activated, so that a change not yet applied on the
main loop is never taken for one undone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.lease_thread import LeaseThread, exit_at_once
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.observability.metrics import Metrics
from ansible_operator.sharding.ring import Drain, LocalShare, ShardRing, replica_identity


class _MainLoopShare:
    """A `Share` whose effects run on the main loop, in the order decided."""

    def __init__(
        self, local: LocalShare, main: asyncio.AbstractEventLoop, on_lost: Callable[[], None]
    ) -> None:
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


class ShardRingThread(LeaseThread):
    """`ShardRing` on its own thread and event loop; used from the main loop."""

    def __init__(
        self,
        config: KubeConfig,
        share: ObjectShare,
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
        on_wedged: Callable[[], None] = exit_at_once,
    ) -> None:
        super().__init__(
            config,
            thread_name=f"shard-ring-{ring}",
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            trace_configs=trace_configs,
            on_wedged=on_wedged,
        )
        self.local = LocalShare(share, drain)
        self.ring = ring
        self.namespace = namespace
        self.metrics = metrics
        self.retry_period = retry_period
        self.identity = identity or replica_identity()
        self._joined: asyncio.Future[None] | None = None

    async def join(self) -> None:
        """Join the ring and take a first share; the thread then keeps the Lease."""
        self._joined = asyncio.get_running_loop().create_future()
        self.start_thread()
        try:
            await asyncio.shield(self._joined)
        except asyncio.CancelledError:
            self.request_stop()
            raise

    async def leave(self) -> None:
        """After this replica's reconciles have stopped: delete the Lease (unless
        the ring was lost) and wait for the thread, at most STOP_TIMEOUT."""
        self.local.activate(frozenset())
        self.request_stop()
        await self.wait_finished()

    # ----- the main loop's side --------------------------------------------------
    def _joined_now(self) -> None:
        if self._joined is not None and not self._joined.done():
            self._joined.set_result(None)

    def lost_now(self) -> None:
        self.local.lose()
        super().lost_now()

    def failed(self, error: Exception) -> None:
        """The thread died: joining fails, or a member's ring is lost."""
        if self._joined is not None and not self._joined.done():
            self._joined.set_exception(error)
        else:
            self.lost_now()

    # ----- the thread's side -----------------------------------------------------
    async def keep(self, api: ApiClient) -> None:
        assert self.main is not None
        ring = ShardRing(
            api,
            _MainLoopShare(self.local, self.main, self.lost_now),
            ring=self.ring,
            namespace=self.namespace,
            metrics=self.metrics,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            identity=self.identity,
        )
        await ring.join()
        self.tell_main(self._joined_now)
        ring.start()
        if await self.until_stopped(ring.lost.wait()):
            await ring.leave()  # stops its tasks; the Lease is left to expire
            await self.exit_if_unheard(f"shard ring={self.ring} identity={self.identity}")
            return
        await ring.leave()
