"""Keeping a Lease on a thread of its own, so that it is renewed however busy
the operator's event loop is: leader election (manager/leader_thread.py) and
the shard ring (sharding/ring_thread.py) both run here.

A Lease renewed on the main loop is lost whenever that loop is starved or
blocked past the renew deadline (a burst of events, a slow callback, a CPU
saturated by runs), and a busy operator then restarts in a loop. A
`LeaseThread` runs its `keep()` on a dedicated thread with its own event loop
and its own `ApiClient`: its own connection pool (a renewal never queues
behind the main loop's requests) and its own copy of the KubeConfig (a changed
kubeconfig is followed by both; credentials are shared, their renewal is
thread-safe).

The main loop only hears news, in order, through `call_soon_threadsafe`
(`tell_main`). When the Lease is lost, the main loop must stop reconciling; if
it does not even take that news within a lease duration (it is wedged), the
process exits with status 1 from the thread: the Lease may be someone else's by
then, and this replica's runs must not go on beside theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable

import aiohttp

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.types import Resource

log = logging.getLogger("ansible_operator.leader")

# The kind leader election and the shard ring keep (verbs: what the API serves).
LEASES = Resource(
    group="coordination.k8s.io",
    version="v1",
    kind="Lease",
    plural="leases",
    namespaced=True,
    verbs=frozenset(
        {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
    ),
)
STOP_TIMEOUT = 10.0  # seconds a release may take before the thread is left behind


def exit_at_once() -> None:
    os._exit(1)  # the main loop cannot run a clean exit: it does not run at all


class LeaseThread:
    """Subclasses write `keep(api)` (on the thread) and `failed(error)` (on the
    main loop: the thread died); `lost` is set on the main loop by `lost_now`."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        thread_name: str,
        lease_duration: float,
        renew_deadline: float,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        on_wedged: Callable[[], None] = exit_at_once,
    ) -> None:
        self.config = config.for_another_loop()
        self.thread_name = thread_name
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.trace_configs = trace_configs
        self.on_wedged = on_wedged
        self.lost = asyncio.Event()  # on the main loop
        self.main: asyncio.AbstractEventLoop | None = None
        self.stop_signal: asyncio.Event | None = None  # on the thread's loop, once it runs
        self._finished: asyncio.Future[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = threading.Event()
        self._loss_heard = threading.Event()

    # ----- the main loop's side --------------------------------------------------
    def start_thread(self) -> None:
        self.main = asyncio.get_running_loop()
        self._finished = self.main.create_future()
        self._thread = threading.Thread(target=self._run_thread, name=self.thread_name, daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        self._stop_requested.set()  # seen by a thread whose loop is not up yet
        if self._loop is not None and self.stop_signal is not None:
            with contextlib.suppress(RuntimeError):  # its loop already closed
                self._loop.call_soon_threadsafe(self.stop_signal.set)

    async def wait_finished(self) -> None:
        """Wait for the thread to end, at most STOP_TIMEOUT."""
        if self._finished is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._finished), STOP_TIMEOUT)

    def lost_now(self) -> None:
        self._loss_heard.set()
        self.lost.set()

    def failed(self, error: Exception) -> None:
        """The thread died (on the main loop)."""
        self.lost_now()

    def _finished_now(self) -> None:
        if self._finished is not None and not self._finished.done():
            self._finished.set_result(None)

    # ----- the thread's side -----------------------------------------------------
    def tell_main(self, callback: Callable[[], None]) -> None:
        if self.main is not None:
            with contextlib.suppress(RuntimeError):  # the main loop closed: nobody listens
                self.main.call_soon_threadsafe(callback)

    def _run_thread(self) -> None:
        try:
            asyncio.run(self._keep_with_client())
        except Exception as error:
            log.error("%s failed", self.thread_name, exc_info=True)
            self.tell_main(functools.partial(self.failed, error))
        finally:
            self.tell_main(self._finished_now)

    async def _keep_with_client(self) -> None:
        # stop_signal before _loop: a main loop that sees _loop finds stop_signal too.
        self.stop_signal = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop_requested.is_set():
            self.stop_signal.set()
        # A request may take no longer than the renew deadline: a holder that
        # cannot renew in that time must let go anyway.
        async with ApiClient(
            self.config, timeout=self.renew_deadline, trace_configs=self.trace_configs
        ) as api:
            await self.keep(api)

    async def keep(self, api: ApiClient) -> None:
        raise NotImplementedError

    async def until_stopped(self, work: object) -> bool:
        """Run `work` until it ends (True) or a stop is requested (False)."""
        assert self.stop_signal is not None
        task = asyncio.ensure_future(work)  # type: ignore[arg-type]
        stop = asyncio.ensure_future(self.stop_signal.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return False
        task.result()
        return True

    async def exit_if_unheard(self, what: str) -> None:
        """Once the Lease is lost: the main loop must stop reconciling within a
        lease duration, or the process ends here."""
        heard = await asyncio.to_thread(self._loss_heard.wait, self.lease_duration)
        if not heard:
            log.error(
                "%s lost and the event loop has not stopped within %gs: exiting",
                what,
                self.lease_duration,
            )
            self.on_wedged()
