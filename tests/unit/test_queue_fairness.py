"""The work queue's ordering over any sequence of adds, hand-outs and dones
(Hypothesis): each hand-out is the highest-priority item (first to reach its
level) or, at least once in every `fair_every`, the longest-waiting one; an
item is never handed out while it is processed; every item added is handed
out after its last add."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_operator.controller.queue import WorkQueue

ITEMS = st.integers(min_value=0, max_value=11)
PRIORITIES = st.sampled_from([-100, -50, 0, 100])
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), ITEMS, PRIORITIES),
        st.tuples(st.just("take"), st.just(0), st.just(0)),
        st.tuples(st.just("done"), st.integers(min_value=0, max_value=7), st.just(0)),
    ),
    max_size=120,
)


@dataclass
class Waiting:
    """What the queue should hold, the naive way: O(n) per question."""

    priority: int
    reached: int  # when it reached its priority
    first: int  # when it was first queued


@dataclass
class Model:
    queued: dict[int, Waiting] = field(default_factory=dict)
    processing: list[int] = field(default_factory=list)  # in the order handed out
    dirty: dict[int, int] = field(default_factory=dict)
    clock: int = 0
    owed: set[int] = field(default_factory=set)  # added since last handed out

    def add(self, item: int, priority: int) -> None:
        self.clock += 1
        self.owed.add(item)
        if item in self.processing:
            self.dirty[item] = max(priority, self.dirty.get(item, priority))
        elif item not in self.queued:
            self.queued[item] = Waiting(priority, self.clock, self.clock)
        elif priority > self.queued[item].priority:
            self.queued[item].priority, self.queued[item].reached = priority, self.clock

    def highest(self) -> int:
        return min(self.queued, key=lambda i: (-self.queued[i].priority, self.queued[i].reached))

    def oldest(self) -> int:
        return min(self.queued, key=lambda i: self.queued[i].first)

    def handed_out(self, item: int) -> None:
        del self.queued[item]
        self.processing.append(item)
        self.owed.discard(item)

    def done(self, item: int) -> None:
        self.processing.remove(item)
        if item in self.dirty:
            self.add(item, self.dirty.pop(item))


async def play(operations: list[tuple[str, int, int]], fair_every: int) -> None:
    queue: WorkQueue[int] = WorkQueue(fair_every=fair_every)
    model = Model()
    passed_over = 0  # hand-outs in a row that were not the oldest item
    for operation, item, priority in operations:
        if operation == "add":
            queue.add(item, priority)
            model.add(item, priority)
        elif operation == "take" and model.queued:
            highest, oldest = model.highest(), model.oldest()
            handout = await queue.take()
            assert handout.item not in model.processing
            assert handout.item in (highest, oldest)
            passed_over = 0 if handout.item == oldest else passed_over + 1
            assert passed_over < fair_every, "the oldest item was passed over too often"
            assert handout.priority == model.queued[handout.item].priority
            model.handed_out(handout.item)
        elif operation == "done" and model.processing:
            done = model.processing[item % len(model.processing)]
            queue.done(done)
            model.done(done)
        assert len(queue) == len(model.queued)
    # Drained: every item added since it was last handed out comes out, once each time.
    while model.queued or model.processing:
        for done in list(model.processing):
            queue.done(done)
            model.done(done)
        while model.queued:
            handout = await queue.take()
            assert handout.item in (model.highest(), model.oldest())
            model.handed_out(handout.item)
    assert not model.owed
    assert len(queue) == 0 and queue.processing == 0


@settings(max_examples=300, deadline=None)
@given(OPERATIONS, st.integers(min_value=1, max_value=6))
def test_hand_outs_are_by_priority_with_fair_turns_and_nothing_is_lost(
    operations: list[tuple[str, int, int]], fair_every: int
) -> None:
    asyncio.run(play(operations, fair_every))
