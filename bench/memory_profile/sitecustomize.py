"""A memory profile of a running operator, taken when a bench asks for it (bench/scale.py).

Python imports this module at start-up when its folder is on PYTHONPATH. With
ANSIBLE_OPERATOR_MEMORY_PROFILE=<folder> in the environment, a daemon thread waits
for `<folder>/<pid>.request` and answers it with `<folder>/<pid>.txt`: the live
objects by type (count and bytes, the containers the garbage collector tracks and
the strings, bytes and numbers they hold), and, when ANSIBLE_OPERATOR_TRACEMALLOC=<frames>
started tracemalloc at start-up, the allocations by source line and by file.

A thread, not a signal handler: a handler runs on the main thread, between the event
loop's callbacks, and a census of a million objects would block the loop for its
whole length. Both variables are taken out of the environment, so the processes
the operator starts (runs, workers) neither trace nor answer.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

TOP = 30


def census() -> list[str]:
    """Live objects by type: the tracked containers and the untracked values they hold."""
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    seen: set[int] = set()
    for container in gc.get_objects():
        kind = type(container).__name__
        counts[kind] += 1
        sizes[kind] += sys.getsizeof(container)
        for value in gc.get_referents(container):
            if gc.is_tracked(value) or id(value) in seen:
                continue
            seen.add(id(value))
            kind = type(value).__name__
            counts[kind] += 1
            sizes[kind] += sys.getsizeof(value)
    total = sum(sizes.values())
    lines = [f"live objects by type: {sum(counts.values())} objects, {total / 2**20:.1f} MiB"]
    for kind, size in sizes.most_common(TOP):
        lines.append(f"{size / 2**20:9.2f} MiB {counts[kind]:>10} {kind}")
    return lines


def allocations() -> list[str]:
    import tracemalloc

    if not tracemalloc.is_tracing():
        return ["tracemalloc: not tracing (ANSIBLE_OPERATOR_TRACEMALLOC=<frames> starts it)"]
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    traced, peak = tracemalloc.get_traced_memory()
    lines = [f"tracemalloc: {traced / 2**20:.1f} MiB traced now, {peak / 2**20:.1f} MiB at peak"]
    for grouping in ("lineno", "filename"):
        lines.append(f"\nallocations by {grouping}:")
        for stat in snapshot.statistics(grouping)[:TOP]:
            frame = stat.traceback[0]
            where = f"{frame.filename}:{frame.lineno}" if grouping == "lineno" else frame.filename
            lines.append(f"{stat.size / 2**20:9.2f} MiB {stat.count:>10} {where}")
    return lines


def answer(folder: Path) -> None:
    request = folder / f"{os.getpid()}.request"
    while True:
        if request.exists():
            started = time.monotonic()
            lines = [*census(), "", *allocations()]
            lines.append(f"\n(profile taken in {time.monotonic() - started:.1f} s)")
            partial = folder / f"{os.getpid()}.part"
            partial.write_text("\n".join(lines) + "\n")
            partial.rename(folder / f"{os.getpid()}.txt")
            request.unlink()
        time.sleep(0.5)


def _start() -> None:
    folder = os.environ.pop("ANSIBLE_OPERATOR_MEMORY_PROFILE", None)
    frames = os.environ.pop("ANSIBLE_OPERATOR_TRACEMALLOC", None)
    if not folder:
        return
    if frames:
        import tracemalloc

        tracemalloc.start(int(frames))
    thread = threading.Thread(target=answer, args=(Path(folder),), name="memory-profile")
    thread.daemon = True
    thread.start()


_start()
