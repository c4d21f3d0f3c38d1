"""Which reconcile goes first (controller-runtime's priority queue): a change
someone made goes ahead of the objects a list announced and the periodic runs,
so that after a start or a resync of thousands of objects an edit still runs
within seconds. Pure: the queue (queue.py) orders by the number, the
controller (controller.py) asks `priority()` for each add.

    source     level   what queued the object
    change         0   a watch event of the object, or of a dependent of it
    requeue      -50   its role's requeue_after
    retry        -50   a failed reconcile, after its backoff
    periodic    -100   the reconcile period
    list        -100   a list: the informer's first one, a relist finding an object
                       it did not hold, a namespace entering the scope, a shard
                       ring's share growing, a listener added late

A relist that finds an object changed or gone while the watch was down reports
a change (level 0): someone made it. The priority of an add is its source's
level, plus the watch's `priority` (watches.yaml, -1000..1000: one kind before
another where their runs meet, `--max-concurrent-runs`), plus the object's
annotation (`ansible.sdk.operatorframework.io/priority`, -100..100: one object
before others of its kind). The annotation is bounded so that whoever may
annotate an object can rank its lists and periodic runs with other objects'
changes, never ahead of them. The queue keeps no one waiting for ever: the
longest-waiting object gets every FAIR_EVERY-th turn (queue.py).
"""

from __future__ import annotations

from enum import StrEnum


class Source(StrEnum):
    CHANGE = "change"
    REQUEUE = "requeue"
    RETRY = "retry"
    PERIODIC = "periodic"
    LIST = "list"


LEVELS: dict[Source, int] = {
    Source.CHANGE: 0,
    Source.REQUEUE: -50,
    Source.RETRY: -50,
    Source.PERIODIC: -100,
    Source.LIST: -100,
}
# What an object's annotation may add to its priority (whoever may annotate it).
ANNOTATED_LOWEST, ANNOTATED_HIGHEST = -100, 100


def priority(source: Source, watch: int = 0, annotated: int = 0) -> int:
    """The priority of an add from `source`, for an object of a watch of
    priority `watch` annotated with `annotated`."""
    return LEVELS[source] + watch + annotated


def event_source(event: str, listed: bool) -> Source:
    """Where an informer's event of a primary object puts it: an object a list
    announced (ADDED from a list: the state found, not a change) is `LIST`;
    everything else the informer reports (a watch event, or a relist finding
    an object changed or gone) is a `CHANGE`."""
    if event == "ADDED" and listed:
        return Source.LIST
    return Source.CHANGE
