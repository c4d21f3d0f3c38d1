"""The generic controller: what it does with each outcome of a reconcile, and
that one object is never reconciled twice at once. The reconciler is scripted."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ansible_operator.controller.controller import Controller
from ansible_operator.controller.priorities import Source
from ansible_operator.controller.queue import Backoff
from ansible_operator.controller.reconcile import ObjectKey, Outcome
from ansible_operator.kube.client import ApiError
from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner.slots import current_priority

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

KEY = ObjectKey("team", "mc")
LABEL = "cache.example.com/v1alpha1/Memcached"


class ScriptedReconciler:
    """Answers each reconcile with the next step of its script (an Outcome, or
    an exception to raise); the step may wait for `gate` first."""

    def __init__(self, *script: Outcome | Exception) -> None:
        self.script = list(script)
        self.seen: list[ObjectKey] = []
        self.running = 0
        self.most_at_once = 0
        self.gate: asyncio.Event | None = None
        self.started = asyncio.Event()
        self.finished = asyncio.Event()

    async def reconcile(self, key: ObjectKey) -> Outcome:
        self.seen.append(key)
        self.started.set()
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            step = self.script.pop(0) if self.script else Outcome()
            if isinstance(step, Exception):
                raise step
            return step
        finally:
            self.running -= 1
            if not self.script:
                self.finished.set()


async def run_until_finished(reconciler: ScriptedReconciler, *, workers: int = 1) -> Controller:
    controller = Controller(LABEL, "Memcached", reconciler, workers=workers, metrics=Metrics())
    controller.start()
    controller.enqueue(KEY)
    await asyncio.wait_for(reconciler.finished.wait(), 5)
    for _ in range(3):
        await asyncio.sleep(0)  # the worker follows the last outcome
    return controller


async def test_requeue_after_runs_the_object_again_after_that_long() -> None:
    controller = await run_until_finished(ScriptedReconciler(Outcome(requeue_after=600.0)))
    delay = controller.queue.pending_delay(KEY)
    assert delay is not None and 590 < delay <= 600
    assert controller.queue.backoff.failures(KEY) == 0
    await controller.stop(0)


async def test_an_outcome_asking_nothing_waits_for_the_next_event() -> None:
    controller = await run_until_finished(ScriptedReconciler(Outcome()))
    assert controller.queue.pending_delay(KEY) is None and len(controller.queue) == 0
    await controller.stop(0)


@pytest.mark.parametrize(
    ("failure", "logged"),
    [
        (Outcome(retry=True), "retrying with backoff kind=Memcached namespace=team name=mc"),
        (ApiError(409, "Conflict", "the object has been modified"), "reconcile hit an API error"),
        (RuntimeError("a bug"), "reconcile crashed kind=Memcached namespace=team name=mc"),
    ],
    ids=["retry", "API error", "crash"],
)
async def test_a_failure_backs_off_and_a_success_resets_the_backoff(
    failure: Outcome | Exception, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ansible_operator.controller")
    reconciler = ScriptedReconciler(failure, failure, Outcome())
    reconciler.gate = asyncio.Event()
    controller = Controller(LABEL, "Memcached", reconciler, workers=1, metrics=Metrics())
    controller.queue.backoff.base = 0.01  # the retries come quickly
    controller.start()
    controller.enqueue(KEY)
    reconciler.gate.set()
    await asyncio.wait_for(reconciler.finished.wait(), 5)
    await asyncio.sleep(0)

    assert reconciler.seen == [KEY, KEY, KEY]  # twice failed, retried, then succeeded
    assert controller.queue.backoff.failures(KEY) == 0
    assert logged in caplog.text
    await controller.stop(0)


async def test_one_object_is_never_reconciled_twice_at_once_and_changes_coalesce() -> None:
    reconciler = ScriptedReconciler(Outcome(), Outcome())
    reconciler.gate = asyncio.Event()
    controller = Controller(LABEL, "Memcached", reconciler, workers=4, metrics=Metrics())
    controller.start()
    controller.enqueue(KEY)
    await asyncio.wait_for(reconciler.started.wait(), 5)
    for _ in range(5):
        controller.enqueue(KEY)  # changes arriving during the reconcile
    await asyncio.sleep(0.05)
    assert reconciler.running == 1

    reconciler.gate.set()
    await asyncio.wait_for(reconciler.finished.wait(), 5)
    await asyncio.sleep(0.05)

    assert reconciler.seen == [KEY, KEY]  # one follow-up for the five changes
    assert reconciler.most_at_once == 1
    await controller.stop(0)


async def test_stop_lets_a_reconcile_finish_within_the_grace_then_takes_no_more() -> None:
    reconciler = ScriptedReconciler(Outcome(), Outcome())
    reconciler.gate = asyncio.Event()
    controller = Controller(LABEL, "Memcached", reconciler, workers=1, metrics=Metrics())
    controller.start()
    controller.enqueue(KEY)
    await asyncio.wait_for(reconciler.started.wait(), 5)

    stopping = asyncio.create_task(controller.stop(30))
    await asyncio.sleep(0.01)
    controller.enqueue(ObjectKey("team", "other"))  # too late: the queue is shut
    reconciler.gate.set()
    await asyncio.wait_for(stopping, 5)

    assert reconciler.seen == [KEY]
    assert len(reconciler.script) == 1  # the first reconcile ran to its end


async def test_stop_cancels_a_reconcile_that_outlasts_the_grace() -> None:
    reconciler = ScriptedReconciler(Outcome())
    reconciler.gate = asyncio.Event()  # never set: the reconcile hangs
    controller = Controller(LABEL, "Memcached", reconciler, workers=1, metrics=Metrics())
    controller.start()
    controller.enqueue(KEY)
    await asyncio.wait_for(reconciler.started.wait(), 5)

    await asyncio.wait_for(controller.stop(0.01), 5)

    assert reconciler.running == 0 and reconciler.script == [Outcome()]


async def test_the_queue_depth_and_reconcile_durations_are_exported() -> None:
    metrics = Metrics()
    reconciler = ScriptedReconciler(Outcome(), Outcome())
    controller = Controller(LABEL, "Memcached", reconciler, workers=1, metrics=metrics)
    controller.enqueue(KEY)
    controller.enqueue(ObjectKey("team", "other"))
    exposition = metrics.exposition().decode()
    assert f'ansible_operator_queue_depth{{GVK="{LABEL}"}} 2.0' in exposition

    controller.start()
    await asyncio.wait_for(reconciler.finished.wait(), 5)
    await asyncio.sleep(0.05)
    exposition = metrics.exposition().decode()
    assert f'ansible_operator_queue_depth{{GVK="{LABEL}"}} 0.0' in exposition
    assert f'ansible_operator_reconciles_count{{GVK="{LABEL}"}} 2.0' in exposition
    await controller.stop(0)


# ----- priorities ------------------------------------------------------------------


class Recording:
    """Answers each reconcile with `outcomes[key]` (once) and notes the order and
    the run priority each reconcile had current."""

    def __init__(self, outcomes: dict[ObjectKey, Outcome] | None = None) -> None:
        self.outcomes = dict(outcomes or {})
        self.order: list[ObjectKey] = []
        self.priorities: list[int] = []
        self.changed = asyncio.Event()

    async def reconcile(self, key: ObjectKey) -> Outcome:
        self.order.append(key)
        self.priorities.append(current_priority())
        self.changed.set()
        return self.outcomes.pop(key, Outcome())

    async def until(self, count: int) -> None:
        while len(self.order) < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 60)


def keys(*names: str) -> list[ObjectKey]:
    return [ObjectKey("team", name) for name in names]


async def test_a_changed_object_is_reconciled_before_the_listed_ones() -> None:
    reconciler = Recording()
    controller = Controller(LABEL, "Memcached", reconciler, workers=1, metrics=Metrics())
    for key in keys("a", "b", "c", "d"):
        controller.enqueue(key, Source.LIST)  # a start: the informer's list
    controller.enqueue(ObjectKey("team", "d"))  # then someone edits d
    controller.start()
    await reconciler.until(4)
    assert reconciler.order == keys("d", "a", "b", "c")
    assert reconciler.priorities == [0, -100, -100, -100]
    await controller.stop(0)


async def test_retries_and_requeues_come_between_changes_and_periodic_runs() -> None:
    controller = Controller(LABEL, "Memcached", Recording(), workers=1, metrics=Metrics())
    periodic, requeue, retry, change = keys("periodic", "requeue", "retry", "change")
    for key, source in (
        (periodic, Source.PERIODIC),
        (requeue, Source.REQUEUE),
        (retry, Source.RETRY),
        (change, Source.CHANGE),
    ):
        controller.enqueue(key, source)
    order = [await controller.queue.get() for _ in range(4)]
    assert order == [change, requeue, retry, periodic]


async def test_the_follow_up_of_each_outcome_is_queued_at_its_source() -> None:
    a, b, c = keys("a", "b", "c")
    reconciler = Recording(
        {
            a: Outcome(retry=True),
            b: Outcome(requeue_after=5.0),
            c: Outcome(requeue_after=5.0, periodic=True),
        }
    )
    metrics = Metrics()
    controller = Controller(LABEL, "Memcached", reconciler, workers=1, metrics=metrics)
    controller.queue.backoff = Backoff(base=5.0, jitter=0)
    controller.start()
    for key in (a, b, c):
        controller.enqueue(key)
    await reconciler.until(6)  # each once more, when its follow-up came due
    assert reconciler.priorities[3:] == [-50, -50, -100]
    for source, count in (("change", 3), ("retry", 1), ("requeue", 1), ("periodic", 1)):
        sample = metrics.registry.get_sample_value(
            "ansible_operator_queue_duration_seconds_count", {"GVK": LABEL, "source": source}
        )
        assert sample == count, source
    await controller.stop(0)


async def test_the_watch_and_the_annotation_add_to_the_priority() -> None:
    reconciler = Recording()
    controller = Controller(
        LABEL, "Memcached", reconciler, workers=1, metrics=Metrics(), priority=20
    )
    important, plain = keys("important", "plain")
    controller.annotated(important, 100)
    controller.enqueue(plain, Source.CHANGE)
    controller.enqueue(important, Source.LIST)  # its list ranks with changes (and after them)
    controller.annotated(plain, 0)
    controller.start()
    await reconciler.until(2)
    assert reconciler.order == [plain, important]
    assert reconciler.priorities == [20, 20]
    controller.forget_where(lambda _key: True)
    assert controller._annotated == {}
    await controller.stop(0)


async def test_the_queue_depth_is_exported_by_source() -> None:
    metrics = Metrics()
    controller = Controller(LABEL, "Memcached", Recording(), workers=1, metrics=metrics)
    for key in keys("a", "b", "c"):
        controller.enqueue(key, Source.LIST)
    controller.enqueue(ObjectKey("team", "c"))
    controller.observe_queue()
    exposition = metrics.exposition().decode()
    for source, depth in (("list", 2), ("change", 1), ("retry", 0)):
        line = f'ansible_operator_queue_depth_by_source{{GVK="{LABEL}",source="{source}"}}'
        assert f"{line} {depth}.0" in exposition
