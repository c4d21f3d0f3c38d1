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


# ----- priorities ----------------------------------------------------------------


async def test_higher_priorities_go_first_and_fifo_within_a_level() -> None:
    queue: WorkQueue[str] = WorkQueue(fair_every=100)
    for item, priority in [("l1", -100), ("c1", 0), ("l2", -100), ("r1", -50), ("c2", 0)]:
        queue.add(item, priority)
    assert [await queue.get() for _ in range(5)] == ["c1", "c2", "r1", "l1", "l2"]


async def test_an_item_added_again_keeps_its_highest_priority() -> None:
    queue: WorkQueue[str] = WorkQueue(fair_every=100)
    queue.add("a", -100, "list")
    queue.add("b", -100, "list")
    queue.add("b", 0, "change")  # edited after it was listed: moves up
    queue.add("b", -100, "list")  # a lower add changes nothing
    assert len(queue) == 2
    assert queue.depth("change") == 1 and queue.depth("list") == 1
    first = await queue.take()
    assert (first.item, first.priority, first.source) == ("b", 0, "change")
    assert await queue.get() == "a"


async def test_a_raised_item_joins_the_end_of_its_new_level() -> None:
    queue: WorkQueue[str] = WorkQueue(fair_every=100)
    queue.add("listed", -100)
    queue.add("edited", 0)
    queue.add("listed", 0)  # raised after "edited" reached that level
    assert [await queue.get() for _ in range(2)] == ["edited", "listed"]


async def test_the_longest_waiting_item_gets_every_nth_turn() -> None:
    queue: WorkQueue[str] = WorkQueue(fair_every=3)
    queue.add("old", -100, "list")
    for number in range(6):
        queue.add(f"new{number}", 0, "change")
    order = [await queue.take() for _ in range(4)]
    assert [handout.item for handout in order] == ["new0", "new1", "old", "new2"]
    assert [handout.fair for handout in order] == [False, False, True, False]


async def test_a_follow_up_keeps_the_highest_priority_of_the_adds_during_the_run() -> None:
    queue: WorkQueue[str] = WorkQueue(fair_every=100)
    queue.add("a", -100)
    assert await queue.get() == "a"
    queue.add("a", 0, "change")
    queue.add("a", -100, "list")
    queue.add("b", -50)
    queue.done("a")
    handout = await queue.take()
    assert (handout.item, handout.priority, handout.source) == ("a", 0, "change")


async def test_a_scheduled_add_comes_due_at_the_highest_priority_it_absorbed() -> None:
    queue: WorkQueue[str] = WorkQueue(fair_every=100)
    queue.add_after("a", 10, -100, "periodic")
    queue.add_after("a", 20, -50, "requeue")  # later: the earlier time stays, raised
    queue.add_after("b", 5, -100, "periodic")
    await asyncio.sleep(11)
    first = await queue.take()
    assert (first.item, first.priority, first.source) == ("a", -50, "requeue")
    assert await queue.get() == "b"


async def test_the_wait_is_counted_from_when_the_item_reached_its_priority() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a", -100, "list")
    await asyncio.sleep(60)
    queue.add("a", 0, "change")
    await asyncio.sleep(2)
    handout = await queue.take()
    assert handout.waited == pytest.approx(2)


async def test_an_edit_passes_ten_thousand_listed_items() -> None:
    queue: WorkQueue[int] = WorkQueue()
    for item in range(10_000):
        queue.add(item, -100, "list")
    assert await queue.get() == 0
    queue.add(9_999, 0, "change")
    assert await queue.get() == 9_999
    assert queue.depth("list") == 9_998 and queue.depth("change") == 0


async def test_discarded_items_leave_both_orders() -> None:
    queue: WorkQueue[str] = WorkQueue(fair_every=2)
    for item in ("x1", "k1", "x2", "k2"):
        queue.add(item, 0 if item.endswith("2") else -100)
    assert queue.discard_where(lambda item: item.startswith("x")) == 2
    assert [await queue.get() for _ in range(2)] == ["k2", "k1"]
    assert len(queue) == 0 and queue.depth("") == 0


async def test_a_waiting_worker_wakes_for_an_add_and_a_cancelled_one_passes_its_turn() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")
    first.cancel()  # woken, then cancelled before it ran: the other takes "a"
    assert await asyncio.wait_for(second, 1) == "a"
    assert first.cancelled()
