"""A generic controller (controller-runtime's pkg/internal/controller): a work
queue and its workers, calling a `Reconciler` for each key and turning its
`Outcome` into the queue's next step.

    retry          -> back off (per key, exponential) and run again
    requeue_after  -> forget the backoff, run again after that many seconds
                      (the role's ask, or the reconcile period: `periodic`)
    neither        -> forget the backoff; the next event brings it back

Each key is queued at a priority (priorities.py): what queued it (a change, a
list, a retry, the role's requeue_after, the reconcile period), the watch's
priority and the object's annotated one, which the manager's listener tells
it (`annotated`) and which is kept only for objects that have one. A reconcile
runs with its key's priority current (runner/slots.py), so that where runs
wait for one of the operator's run slots, the higher priority goes first there too.

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

from ansible_operator.controller.priorities import Source, priority
from ansible_operator.controller.queue import ShutDown, WorkQueue
from ansible_operator.controller.reconcile import ObjectKey, Outcome, Reconciler
from ansible_operator.kube.client import ApiError
from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner.slots import prioritized
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
        priority: int = 0,
    ) -> None:
        """`name` labels the queue's metrics (group/version/kind); `kind` is
        what log lines about its objects say; `priority` is the watch's."""
        self.name = name
        self.kind = kind
        self.reconciler = reconciler
        self.workers = workers
        self.metrics = metrics
        self.priority = priority
        self.queue: WorkQueue[ObjectKey] = WorkQueue(name)
        self._annotated: dict[ObjectKey, int] = {}  # objects with a priority annotation
        self._tasks: list[asyncio.Task[None]] = []
        self._stops: dict[ObjectKey, RunStop] = {}  # of the keys being reconciled
        # Whether a key is this replica's to reconcile (a shard ring moves keys away).
        self.admits: Callable[[ObjectKey], bool] = _every_key

    def enqueue(self, key: ObjectKey, source: Source = Source.CHANGE) -> None:
        self.queue.add(key, self._priority(key, source), source)
        self.metrics.queue_depth.labels(self.name).set(len(self.queue))

    def annotated(self, key: ObjectKey, value: int) -> None:
        """The object's priority annotation as last seen (0: none); kept for the
        adds that do not see the object (dependents, retries, requeues)."""
        if value:
            self._annotated[key] = value
        else:
            self._annotated.pop(key, None)

    def _priority(self, key: ObjectKey, source: Source) -> int:
        return priority(source, self.priority, self._annotated.get(key, 0))

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
        for key in [key for key in self._annotated if predicate(key)]:
            del self._annotated[key]
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
        for source in Source:
            by_source = self.metrics.queue_depth_by_source.labels(self.name, source.value)
            by_source.set(self.queue.depth(source.value))

    # ----- workers -----------------------------------------------------------
    def start(self) -> None:
        """Start the workers (once: a second call does nothing)."""
        if self._tasks:
            return
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
                handout = await self.queue.take()
            except ShutDown:
                return
            key = handout.item
            self.metrics.queue_depth.labels(self.name).set(len(self.queue))
            self.metrics.queue_duration.labels(self.name, handout.source).observe(handout.waited)
            if not self.admits(key):
                # Moved to another replica after it was queued: theirs to run now.
                self.queue.done(key)
                continue
            # The queue hands a key to one worker at a time: one stop per key.
            self._stops[key] = RunStop()
            try:
                with stoppable(self._stops[key]), prioritized(handout.priority):
                    outcome = await self._reconcile(key)
                self._follow(key, outcome)
            finally:
                del self._stops[key]
                self.queue.done(key)

    def _follow(self, key: ObjectKey, outcome: Outcome) -> None:
        if outcome.retry:
            delay = self.queue.add_rate_limited(
                key, self._priority(key, Source.RETRY), Source.RETRY
            )
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
            source = Source.PERIODIC if outcome.periodic else Source.REQUEUE
            self.queue.add_after(key, outcome.requeue_after, self._priority(key, source), source)

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
