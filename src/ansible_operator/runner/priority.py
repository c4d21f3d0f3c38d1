"""Who gets the CPU first when it runs out: the operator itself, then admission
runs, then reconcile runs.

Under a saturating reconcile load (more runs than cores, a CPU limit), an
admission request must still be answered within its webhook's timeout, and the
operator's own loop (lease renewal, probes, event intake) must not wait behind
runs. So a reconcile run's processes run at a lower priority (a higher nice
value) than the operator and admission runs. A nice value is inherited by every
process a run starts, needs no privilege to raise and no cgroup controller, so
it holds in any container; the kernel's scheduler weighs nice 10 at about a
tenth of nice 0, and gives idle CPU to anyone, so an idle machine runs as fast.

Each place a run's processes begin (a fresh ansible-runner, a fork of the warm
runner, a run's session of the warm module interpreter) lowers itself by the
increment the run's environment names (NICE_ENV).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

NICE_ENV = "ANSIBLE_OPERATOR_RUN_NICE"
RECONCILE = 10  # reconcile runs (--reconcile-run-nice): after the operator and admission runs
ADMISSION = 0  # admission runs: as the operator (an answer is awaited within seconds)
MAX_NICE = 19


def run_nice(env: Mapping[str, object]) -> int:
    """The run's nice increment, as its environment names it (0 if none or not a number)."""
    with contextlib.suppress(TypeError, ValueError):
        return max(0, min(MAX_NICE, int(str(env.get(NICE_ENV, 0)))))
    return 0


def lower_this_process(env: Mapping[str, object]) -> None:
    """In a process that begins a run: take the run's priority (children inherit it)."""
    increment = run_nice(env)
    if increment:
        with contextlib.suppress(OSError):
            os.nice(increment)
