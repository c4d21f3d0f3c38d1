"""The work queue's guarantees: dedup, one run per object, coalescing, delays, backoff."""

from __future__ import annotations

import asyncio

import pytest

from ansible_operator.controller.queue import Backoff, ShutDown, WorkQueue

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime


async def test_an_item_added_many_times_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"


async def test_an_item_in_process_is_not_handed_out_again_and_changes_coalesce() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    item = await queue.get()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # not handed to a second worker while the first runs
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    queue.done(item)
    assert await asyncio.wait_for(waiter, 1) == "a"  # one follow-up for both adds
    queue.done("a")
    assert len(queue) == 0


async def test_add_after_delays_and_the_earliest_time_wins() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 10)
    queue.add_after("a", 0.05)
    assert len(queue) == 0
    assert await asyncio.wait_for(queue.get(), 1) == "a"
    queue.done("a")
    await asyncio.sleep(0.1)
    assert len(queue) == 0  # the later schedule was superseded


async def test_an_immediate_add_cancels_a_pending_delayed_add() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.05)
    queue.add("a")
    assert await queue.get() == "a"
    queue.done("a")
    await asyncio.sleep(0.1)
    assert len(queue) == 0


def test_backoff_grows_exponentially_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(base=1, cap=5, jitter=0)
    assert [backoff.next_delay("x") for _ in range(5)] == [1, 2, 4, 5, 5]
    assert backoff.next_delay("y") == 1
    backoff.forget("x")
    assert backoff.next_delay("x") == 1


async def test_rate_limited_adds_back_off_per_item() -> None:
    queue: WorkQueue[str] = WorkQueue(backoff=Backoff(base=0.02, cap=1, jitter=0))
    assert queue.add_rate_limited("a") == pytest.approx(0.02)
    assert queue.add_rate_limited("b") == pytest.approx(0.02)
    assert await asyncio.wait_for(queue.get(), 1) in {"a", "b"}


async def test_shutdown_stops_handing_out_work_even_if_items_wait() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    await queue.shutdown()
    with pytest.raises(ShutDown):
        await queue.get()
    queue.add("b")
    assert len(queue) == 1  # nothing new accepted
