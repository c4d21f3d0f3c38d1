"""Leader election on a thread of its own, so that the Lease is renewed however
busy the operator's event loop is.

A leader that renews on the main loop loses its Lease whenever that loop is
starved or blocked past the renew deadline (a burst of events, a slow
callback, a CPU saturated by runs): the manager then exits, and a busy operator
restarts in a loop. Here the `LeaderElector` (manager/leader.py, unchanged:
same checks, same log lines) runs on a dedicated thread with its own event
loop and its own `ApiClient`: its own connection pool (a renewal never queues
behind the main loop's requests) and its own copy of the KubeConfig (a changed
kubeconfig is followed by both; credentials are shared, their renewal is
thread-safe). Acquisition runs there too: one loop owns the elector's state.

The main loop only hears the outcome: `acquire()` returns once this replica
leads; `lost` is set (through `call_soon_threadsafe`) when leadership is lost.
If the main loop does not even take that news within a lease duration (it is
wedged), the process exits with status 1 from this thread: the Lease may be
someone else's by then, and this replica's runs must not go on beside theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable

import aiohttp

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.manager.leader import LeaderElector

log = logging.getLogger("ansible_operator.leader")

STOP_TIMEOUT = 10.0  # seconds a release may take before the thread is left behind


def _exit_at_once() -> None:
    os._exit(1)  # the main loop cannot run a clean exit: it does not run at all


class LeaderElectionThread:
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
        on_wedged: Callable[[], None] = _exit_at_once,
    ) -> None:
        self.config = config.for_another_loop()
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.trace_configs = trace_configs
        self.on_wedged = on_wedged
        self.lost = asyncio.Event()  # on the main loop
        self._thread: threading.Thread | None = None
        self._main: asyncio.AbstractEventLoop | None = None
        self._acquired: asyncio.Future[None] | None = None
        self._finished: asyncio.Future[None] | None = None
        # The thread's own loop and its stop signal, once it runs.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._release_on_stop = False
        self._stop_requested = threading.Event()
        self._loss_heard = threading.Event()

    async def acquire(self) -> None:
        """Wait until this replica holds the Lease; the thread then keeps renewing
        it. Cancelling the wait stops the thread (a standby that stops)."""
        self._main = asyncio.get_running_loop()
        self._acquired = self._main.create_future()
        self._finished = self._main.create_future()
        self._thread = threading.Thread(
            target=self._run_thread, name=f"leader-election-{self.name}", daemon=True
        )
        self._thread.start()
        try:
            await asyncio.shield(self._acquired)
        except asyncio.CancelledError:
            self._request_stop(release=False)
            raise

    async def release(self) -> None:
        """On a clean stop: stop renewing and hand the Lease over at once (unless
        it was lost); waits for the thread, at most STOP_TIMEOUT."""
        self._request_stop(release=not self.lost.is_set())
        if self._finished is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._finished), STOP_TIMEOUT)

    # ----- the main loop's side --------------------------------------------------
    def _request_stop(self, *, release: bool) -> None:
        self._release_on_stop = release
        self._stop_requested.set()  # seen by a thread whose loop is not up yet
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop already closed
                self._loop.call_soon_threadsafe(self._stop.set)

    def _tell_main(self, callback: Callable[[], None]) -> None:
        if self._main is not None:
            with contextlib.suppress(RuntimeError):  # the main loop closed: nobody listens
                self._main.call_soon_threadsafe(callback)

    def _acquired_now(self) -> None:
        if self._acquired is not None and not self._acquired.done():
            self._acquired.set_result(None)

    def _lost_now(self) -> None:
        self._loss_heard.set()
        self.lost.set()

    def _failed_now(self, error: Exception) -> None:
        """The thread died: a standby's wait fails, a leader's leadership is lost."""
        if self._acquired is not None and not self._acquired.done():
            self._acquired.set_exception(error)
        else:
            self._lost_now()

    def _finished_now(self) -> None:
        if self._finished is not None and not self._finished.done():
            self._finished.set_result(None)

    # ----- the thread's side -----------------------------------------------------
    def _run_thread(self) -> None:
        try:
            asyncio.run(self._elect())
        except Exception as error:
            log.error(
                "leader election failed lease=%s/%s identity=%s",
                self.namespace,
                self.name,
                self.identity,
                exc_info=True,
            )
            self._tell_main(functools.partial(self._failed_now, error))
        finally:
            self._tell_main(self._finished_now)

    async def _elect(self) -> None:
        # _stop before _loop: a main loop that sees _loop finds _stop too.
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop_requested.is_set():
            self._stop.set()
        # A request may take no longer than the renew deadline: a leader that
        # cannot renew in that time is no leader anyway.
        async with ApiClient(
            self.config, timeout=self.renew_deadline, trace_configs=self.trace_configs
        ) as api:
            elector = LeaderElector(
                api,
                name=self.name,
                namespace=self.namespace,
                lease_duration=self.lease_duration,
                renew_deadline=self.renew_deadline,
                retry_period=self.retry_period,
                identity=self.identity,
            )
            if not await self._first(elector.acquire()):
                return  # stopped while standing by
            self._tell_main(self._acquired_now)
            if await self._first(elector.lost.wait()):
                self._tell_main(self._lost_now)
                await self._exit_if_unheard()
                return
            if self._release_on_stop:
                await elector.release()
            else:
                elector.stop_renewing()

    async def _first(self, work: object) -> bool:
        """Run `work` until it ends (True) or a stop is requested (False)."""
        assert self._stop is not None
        task = asyncio.ensure_future(work)  # type: ignore[arg-type]
        stop = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return False
        task.result()
        return True

    async def _exit_if_unheard(self) -> None:
        """The main loop must stop reconciling within a lease duration of the loss."""
        heard = await asyncio.to_thread(self._loss_heard.wait, self.lease_duration)
        if not heard:
            log.error(
                "leadership lost and the event loop has not stopped within %gs: exiting "
                "lease=%s/%s identity=%s",
                self.lease_duration,
                self.namespace,
                self.name,
                self.identity,
            )
            self.on_wedged()
