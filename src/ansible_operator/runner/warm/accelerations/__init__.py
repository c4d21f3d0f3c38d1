"""Every warm-runner acceleration, one module each, in the order they are
reported and installed.

Each module holds one acceleration's record (see ../acceleration.py): what
it saves, what it relies on, its probe, and its installers, each for a phase
of a warm process's life; the warm processes (../run_server.py,
../module_server.py) install every record that is on at each phase, naming
none. To add one: write its module here, named as the acceleration, with a
probe that calls what it relies on and checks the effect, an installer per
phase it needs and a hit count; list its record below, and extend
tests/processes/test_accelerations.py, which fails when an acceleration that
is on was never used.
"""

from __future__ import annotations

from ansible_operator.runner.warm.acceleration import Acceleration
from ansible_operator.runner.warm.accelerations import (
    compiled_module_sources,
    event_files_whole,
    kubeconfig_libyaml,
    local_tmp_in_process,
    module_handoff,
    modules_in_one_process,
    parsed_files_shared,
    payload_prebuild,
    playbook_in_fork,
    plugin_preload,
    preloaded_module_utils,
    pty_close_without_delay,
    settings_read_once,
    shared_payload_cache,
    task_inline,
    template_cache,
    warm_module_interpreter,
    worker_caches_prefilled,
    worker_gc_freeze,
)

ACCELERATIONS: tuple[Acceleration, ...] = (
    playbook_in_fork.ACCELERATION,
    settings_read_once.ACCELERATION,
    plugin_preload.ACCELERATION,
    worker_caches_prefilled.ACCELERATION,
    parsed_files_shared.ACCELERATION,
    template_cache.ACCELERATION,
    shared_payload_cache.ACCELERATION,
    payload_prebuild.ACCELERATION,
    warm_module_interpreter.ACCELERATION,
    module_handoff.ACCELERATION,
    compiled_module_sources.ACCELERATION,
    preloaded_module_utils.ACCELERATION,
    modules_in_one_process.ACCELERATION,
    kubeconfig_libyaml.ACCELERATION,
    local_tmp_in_process.ACCELERATION,
    worker_gc_freeze.ACCELERATION,
    # After worker-gc-freeze, so that a task run here does not freeze the heap.
    task_inline.ACCELERATION,
    pty_close_without_delay.ACCELERATION,
    event_files_whole.ACCELERATION,
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
