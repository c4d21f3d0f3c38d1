"""Every warm-runner acceleration, in the order they are reported.

Each is one module's probe and installer (see acceleration.py). To add one:
write its module with a probe, an installer and a hit count, list it here,
and extend tests/processes/test_accelerations.py, which fails when an
acceleration that is on was never used.
"""

from __future__ import annotations

from pathlib import Path

from ansible_operator.runner import (
    ansible_settings,
    bytecode,
    local_tmp,
    module_handoff,
    module_server,
    parse_cache,
    payload_cache,
    plugin_preload,
    prebuild,
    runner_patches,
    template_cache,
    worker_prefill,
)
from ansible_operator.runner.acceleration import Acceleration


def accelerations(shim: Path) -> tuple[Acceleration, ...]:
    """`shim`: the module interpreter shim runs will name as their Python."""
    return (
        runner_patches.PLAYBOOK_IN_FORK_ACCELERATION,
        ansible_settings.SETTINGS_ACCELERATION,
        plugin_preload.ACCELERATION,
        worker_prefill.ACCELERATION,
        parse_cache.ACCELERATION,
        template_cache.ACCELERATION,
        payload_cache.ACCELERATION,
        prebuild.ACCELERATION,
        module_server.interpreter_acceleration(shim),
        module_handoff.ACCELERATION,
        bytecode.ACCELERATION,
        local_tmp.ACCELERATION,
        runner_patches.WORKER_GC_ACCELERATION,
        runner_patches.PTY_CLOSE_ACCELERATION,
        runner_patches.EVENT_FILES_ACCELERATION,
    )


def names() -> tuple[str, ...]:
    return tuple(a.name for a in accelerations(Path()))


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
