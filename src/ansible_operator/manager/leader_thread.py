"""Leader election on a thread of its own (kube/lease_thread.py), so that the
Lease is renewed however busy the operator's event loop is.

The `LeaderElector` (manager/leader.py, unchanged: same checks, same log lines)
runs on the thread's event loop; acquisition runs there too: one loop owns the
elector's state. The main loop only hears the outcome: `acquire()` returns once
this replica leads; `lost` is set when leadership is lost (and the process ends
from the thread if the main loop does not take that news within a lease
duration).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.lease_thread import LeaseThread, exit_at_once
from ansible_operator.manager.leader import LeaderElector, candidate_identity


class LeaderElectionThread(LeaseThread):
    """`LeaderElector` on its own thread and event loop; used from the main loop."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        name: str,
        namespace: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        identity: str | None = None,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        on_wedged: Callable[[], None] = exit_at_once,
    ) -> None:
        super().__init__(
            config,
            thread_name=f"leader-election-{name}",
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            trace_configs=trace_configs,
            on_wedged=on_wedged,
        )
        self.name = name
        self.namespace = namespace
        self.retry_period = retry_period
        self.identity = identity or candidate_identity()
        self._acquired: asyncio.Future[None] | None = None
        self._release_on_stop = False

    async def acquire(self) -> None:
        """Wait until this replica holds the Lease; the thread then keeps renewing
        it. Cancelling the wait stops the thread (a standby that stops)."""
        self._acquired = asyncio.get_running_loop().create_future()
        self.start_thread()
        try:
            await asyncio.shield(self._acquired)
        except asyncio.CancelledError:
            self._stop(release=False)
            raise

    async def release(self) -> None:
        """On a clean stop: stop renewing and hand the Lease over at once (unless
        it was lost); waits for the thread, at most STOP_TIMEOUT."""
        self._stop(release=not self.lost.is_set())
        await self.wait_finished()

    # ----- the main loop's side --------------------------------------------------
    def _stop(self, *, release: bool) -> None:
        self._release_on_stop = release
        self.request_stop()

    def _acquired_now(self) -> None:
        if self._acquired is not None and not self._acquired.done():
            self._acquired.set_result(None)

    def failed(self, error: Exception) -> None:
        """The thread died: a standby's wait fails, a leader's leadership is lost."""
        if self._acquired is not None and not self._acquired.done():
            self._acquired.set_exception(error)
        else:
            self.lost_now()

    # ----- the thread's side -----------------------------------------------------
    async def keep(self, api: ApiClient) -> None:
        elector = LeaderElector(
            api,
            name=self.name,
            namespace=self.namespace,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            identity=self.identity,
        )
        if not await self.until_stopped(elector.acquire()):
            return  # stopped while standing by
        self.tell_main(self._acquired_now)
        if await self.until_stopped(elector.lost.wait()):
            self.tell_main(self.lost_now)
            await self.exit_if_unheard(
                f"leadership lease={self.namespace}/{self.name} identity={self.identity}"
            )
            return
        if self._release_on_stop:
            await elector.release()
        else:
            elector.stop_renewing()
