"""A generic controller (controller-runtime's pkg/internal/controller): a work
queue and its workers, calling a `Reconciler` for each key and turning its
`Outcome` into the queue's next step.

    retry          -> back off (per key, exponential) and run again
    requeue_after  -> forget the backoff, run again after that many seconds
    neither        -> forget the backoff; the next event brings it back

It knows nothing of Ansible, watches or informers: what to reconcile comes in
through `enqueue`, how to reconcile is the reconciler's business. `stop_run`
stops the run of a reconcile in flight whose object is gone (runner/stopping.py):
that reconcile ends with nothing reported and nothing requeued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from ansible_operator.controller.queue import ShutDown, WorkQueue
from ansible_operator.controller.reconcile import ObjectKey, Outcome, Reconciler
from ansible_operator.kube.client import ApiError
from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner.stopping import RunStop, RunStopped, stoppable

log = logging.getLogger("ansible_operator.controller")


class Controller:
    def __init__(
        self,
        name: str,
        kind: str,
        reconciler: Reconciler,
        *,
        workers: int,
        metrics: Metrics,
    ) -> None:
        """`name` labels the queue's metrics (group/version/kind); `kind` is
        what log lines about its objects say."""
        self.name = name
        self.kind = kind
        self.reconciler = reconciler
        self.workers = workers
        self.metrics = metrics
        self.queue: WorkQueue[ObjectKey] = WorkQueue(name)
        self._tasks: list[asyncio.Task[None]] = []
        self._stops: dict[ObjectKey, RunStop] = {}  # of the keys being reconciled
        # Whether a key is this replica's to reconcile (a shard ring moves keys away).
        self.admits: Callable[[ObjectKey], bool] = _every_key

    def enqueue(self, key: ObjectKey) -> None:
        self.queue.add(key)
        self.observe_queue()

    def forget_namespace(self, namespace: str) -> None:
        """The objects of `namespace` are no longer ours (it left the watched
        namespaces): drop their keys, queued or scheduled; a run in flight finishes."""
        dropped = self.forget_where(lambda key: key.namespace == namespace)
        if dropped:
            log.info(
                "forgot queued objects of a namespace out of scope kind=%s namespace=%s count=%d",
                self.kind,
                namespace,
                dropped,
            )

    def forget_where(self, predicate: Callable[[ObjectKey], bool]) -> int:
        """Drop the matching keys, queued or scheduled (their objects went to
        another replica); a reconcile in flight goes on (see `in_flight`)."""
        dropped = self.queue.discard_where(predicate)
        self.observe_queue()
        return dropped

    def in_flight(self, predicate: Callable[[ObjectKey], bool]) -> list[ObjectKey]:
        """The matching keys being reconciled now."""
        return [key for key in self._stops if predicate(key)]

    def stop_run(self, key: ObjectKey, reason: str) -> None:
        """Stop the run of `key`'s reconcile in flight, if there is one: its
        processes are killed, and the reconcile ends without a word on the object."""
        stop = self._stops.get(key)
        if stop is not None:
            stop.request(reason)

    def observe_queue(self) -> None:
        self.metrics.queue_depth.labels(self.name).set(len(self.queue))

    # ----- workers -----------------------------------------------------------
    def start(self) -> None:
        for number in range(self.workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"{self.name}#{number}"))

    async def stop(self, grace: float) -> None:
        """Stop taking work; let reconciles finish for `grace` seconds, then cancel them."""
        await self.queue.shutdown()
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(self._tasks, timeout=grace)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            self.observe_queue()
            if not self.admits(key):
                # Moved to another replica after it was queued: theirs to run now.
                self.queue.done(key)
                continue
            # The queue hands a key to one worker at a time: one stop per key.
            self._stops[key] = RunStop()
            try:
                with stoppable(self._stops[key]):
                    outcome = await self._reconcile(key)
                self._follow(key, outcome)
            finally:
                del self._stops[key]
                self.queue.done(key)

    def _follow(self, key: ObjectKey, outcome: Outcome) -> None:
        if outcome.retry:
            delay = self.queue.add_rate_limited(key)
            log.info(
                "retrying with backoff kind=%s namespace=%s name=%s delay=%.1fs",
                self.kind,
                key.namespace,
                key.name,
                delay,
            )
            return
        self.queue.forget(key)
        if outcome.requeue_after is not None and outcome.requeue_after > 0:
            self.queue.add_after(key, outcome.requeue_after)

    async def _reconcile(self, key: ObjectKey) -> Outcome:
        started = time.monotonic()
        try:
            return await self.reconciler.reconcile(key)
        except RunStopped as stopped:
            self.metrics.reconcile_result.labels(self.name, "cancelled").inc()
            log.info(
                "run cancelled kind=%s namespace=%s name=%s run=%s reason=%r",
                self.kind,
                key.namespace,
                key.name,
                stopped.ident or "-",
                stopped.reason,
            )
            return Outcome()
        except ApiError as error:
            log.warning(
                "reconcile hit an API error kind=%s namespace=%s name=%s error=%s",
                self.kind,
                key.namespace,
                key.name,
                error,
            )
            return Outcome(retry=True)
        except Exception:
            log.exception(
                "reconcile crashed kind=%s namespace=%s name=%s",
                self.kind,
                key.namespace,
                key.name,
            )
            return Outcome(retry=True)
        finally:
            self.metrics.reconciles.labels(self.name).observe(time.monotonic() - started)


def _every_key(_key: ObjectKey) -> bool:
    return True
