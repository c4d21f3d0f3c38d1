"""Every warm-runner acceleration, in the order they are reported and installed.

Each is one module's record (see acceleration.py): its probe, and its
installers, each for a phase of a warm process's life; the warm processes
install every record that is on at each phase, naming none. To add one:
write its module with a probe, an installer per phase it needs and a hit
count, list its record here, and extend tests/processes/test_accelerations.py,
which fails when an acceleration that is on was never used.
"""

from __future__ import annotations

from ansible_operator.runner.warm import (
    ansible_settings,
    bytecode,
    local_tmp,
    module_handoff,
    module_server,
    parse_cache,
    payload_cache,
    playbook_fork,
    plugin_preload,
    prebuild,
    runner_patches,
    task_inline,
    template_cache,
    worker_prefill,
)
from ansible_operator.runner.warm.acceleration import Acceleration

ACCELERATIONS: tuple[Acceleration, ...] = (
    playbook_fork.ACCELERATION,
    ansible_settings.SETTINGS_ACCELERATION,
    plugin_preload.ACCELERATION,
    worker_prefill.ACCELERATION,
    parse_cache.ACCELERATION,
    template_cache.ACCELERATION,
    payload_cache.ACCELERATION,
    prebuild.ACCELERATION,
    module_server.ACCELERATION,
    module_handoff.ACCELERATION,
    bytecode.ACCELERATION,
    local_tmp.ACCELERATION,
    runner_patches.WORKER_GC_ACCELERATION,
    # After worker-gc-freeze, so that a task run here does not freeze the heap.
    task_inline.ACCELERATION,
    runner_patches.PTY_CLOSE_ACCELERATION,
    runner_patches.EVENT_FILES_ACCELERATION,
)


def names() -> tuple[str, ...]:
    return tuple(a.name for a in ACCELERATIONS)


def acceleration_names(value: str) -> list[str]:
    """`--disable-acceleration` as given: names, comma-separated."""
    given = [name.strip() for name in value.split(",") if name.strip()]
    known = names()
    unknown = [name for name in given if name not in known]
    if unknown:
        raise ValueError(
            f"no acceleration named {', '.join(unknown)}; there are: {', '.join(known)}"
        )
    return given
