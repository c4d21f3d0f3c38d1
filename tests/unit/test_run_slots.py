"""The operator's run slots: a freed slot goes to the waiting run of the highest
priority (the context's), first come first served within one, with every
`fair_every`-th turn to the run that has waited longest."""

from __future__ import annotations

import asyncio

import pytest

from ansible_operator.runner.slots import RunSlots, current_priority, prioritized

pytestmark = pytest.mark.looptime


class Runs:
    def __init__(self, slots: RunSlots) -> None:
        self.slots = slots
        self.started: list[str] = []
        self.release = asyncio.Event()

    async def run(self, name: str, priority: int) -> None:
        with prioritized(priority):
            async with self.slots.held():
                self.started.append(name)
                await self.release.wait()

    async def queued(self, name: str, priority: int) -> asyncio.Task[None]:
        task = asyncio.create_task(self.run(name, priority))
        await asyncio.sleep(0)
        return task


async def drained(runs: Runs, tasks: list[asyncio.Task[None]]) -> None:
    runs.release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)


async def test_a_freed_slot_goes_to_the_highest_priority_first_come_within_one() -> None:
    runs = Runs(RunSlots(1, fair_every=100))
    tasks = [await runs.queued("running", -100)]
    for name, priority in [("list1", -100), ("edit1", 0), ("retry", -50), ("edit2", 0)]:
        tasks.append(await runs.queued(name, priority))
    assert runs.started == ["running"] and runs.slots.waiting == 4
    await drained(runs, tasks)
    assert runs.started == ["running", "edit1", "edit2", "retry", "list1"]


async def test_the_longest_waiting_run_gets_every_nth_slot() -> None:
    runs = Runs(RunSlots(1, fair_every=2))
    tasks = [await runs.queued("running", 0), await runs.queued("old", -100)]
    for number in range(3):
        tasks.append(await runs.queued(f"edit{number}", 0))
    await drained(runs, tasks)
    assert runs.started == ["running", "edit0", "old", "edit1", "edit2"]


async def test_a_cancelled_waiter_leaves_and_one_given_a_slot_passes_it_on() -> None:
    slots = RunSlots(1)
    runs = Runs(slots)
    first = await runs.queued("first", 0)
    leaving = await runs.queued("leaving", 0)
    last = await runs.queued("last", 0)
    leaving.cancel()
    await asyncio.sleep(0)
    assert slots.waiting == 1
    await drained(runs, [first, last])
    assert runs.started == ["first", "last"] and slots.free == 1


async def test_a_slot_given_to_a_waiter_cancelled_before_it_ran_goes_to_the_next() -> None:
    # Each run enters its slot as the runner does, inside its own task (a task that is
    # only the context manager's __aenter__ is not cancelled alike on Python 3.11,
    # whose anext() does not pass the cancellation into the generator).
    slots = RunSlots(1)
    entered: list[str] = []
    someone_entered = asyncio.Event()

    async def run(name: str) -> None:
        async with slots.held(0):
            entered.append(name)
            someone_entered.set()
            await asyncio.Event().wait()

    holding = slots.held()
    await holding.__aenter__()
    leaving = asyncio.create_task(run("leaving"))
    last = asyncio.create_task(run("last"))
    await asyncio.sleep(0)
    await holding.__aexit__(None, None, None)  # the slot goes to "leaving"...
    leaving.cancel()  # ...which is cancelled before it runs
    await asyncio.wait_for(someone_entered.wait(), 5)
    assert leaving.cancelled() and entered == ["last"]
    assert slots.waiting == 0 and slots.free == 0
    last.cancel()


async def test_a_waiter_cancelled_with_the_holder_is_passed_over() -> None:
    # Both cancelled at once (the operator stopping): the waiter's future is
    # cancelled before the holder's release runs, its task leaves only after.
    slots = RunSlots(1)
    runs = Runs(slots)
    first = await runs.queued("first", 0)
    leaving = await runs.queued("leaving", 0)
    last = await runs.queued("last", 0)
    first.cancel()
    leaving.cancel()
    await asyncio.wait({first, leaving}, timeout=5)
    assert first.cancelled() and leaving.cancelled()
    await drained(runs, [last])
    assert runs.started == ["first", "last"] and slots.waiting == 0 and slots.free == 1


async def test_the_priority_is_the_contexts_and_zero_outside_one() -> None:
    assert current_priority() == 0
    with prioritized(-100):
        assert current_priority() == -100
    assert current_priority() == 0
