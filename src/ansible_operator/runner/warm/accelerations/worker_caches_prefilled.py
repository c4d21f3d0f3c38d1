"""What every task's worker would compute and lose, computed once in the warm
runner (acceleration `worker-caches-prefilled`).

Ansible runs each task in a worker forked from ansible-playbook; whatever the
worker caches dies with it. From ansible-core 2.21, every task result is
turned into a `UnifiedTaskResult` through a field mapping that Ansible builds
from the class's type hints (`typing.get_type_hints`, ~20 ms) and caches with
`functools.cache`, and the result's JSON goes through serialization profiles
imported on first use, as are the collection loader's `ansible.builtin`
packages for the connection and shell plugins. Done here, before the fork,
each worker inherits them: the same objects Ansible would have built, so the
results are the same.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    Unavailable,
    parameters_of,
    require,
    used,
)

NAME = "worker-caches-prefilled"
# What a worker imports on its first task (found by comparing its sys.modules
# before and after a task of kubernetes.core.k8s).
WORKER_IMPORTS = (
    "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
    "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
    "ansible.module_utils._internal._json._profiles._module_modern_m2c",
    "ansible.module_utils._internal._json._profiles._module_modern_c2m",
    "ansible_collections.ansible.builtin.plugins.connection",
    "ansible_collections.ansible.builtin.plugins.shell",
    "ansible_collections.ansible.builtin.plugins.filter",
    "ansible_collections.ansible.builtin.plugins.test",
)


def _task_result_class() -> type | None:
    """ansible-core 2.21's task result (None before it)."""
    try:
        from ansible._internal._task import UnifiedTaskResult
    except ImportError:
        return None
    return UnifiedTaskResult


def probe() -> None:
    try:
        importlib.import_module(WORKER_IMPORTS[0])
    except ImportError:
        raise Unavailable(f"no {WORKER_IMPORTS[0]} (ansible-core 2.19+)") from None
    result_class = _task_result_class()
    if result_class is None:
        return
    mapping = getattr(result_class, "get_result_key_to_resolved_field_mapping", None)
    names = getattr(result_class, "_get_field_name_to_result_key_mapping", None)
    require(
        callable(getattr(mapping, "cache_info", None)),
        "UnifiedTaskResult.get_result_key_to_resolved_field_mapping is not a functools cache",
    )
    require(
        callable(getattr(names, "cache_info", None)),
        "UnifiedTaskResult._get_field_name_to_result_key_mapping is not a functools cache",
    )
    require(
        parameters_of(mapping) >= {"source_is_module"},
        "get_result_key_to_resolved_field_mapping takes no source_is_module",
    )
    require(
        parameters_of(names) >= {"for_callback", "for_round_trip"},
        "_get_field_name_to_result_key_mapping takes no for_callback/for_round_trip",
    )


def prefill() -> None:
    """In the warm runner, after the plugin loader is set up."""
    filled = 0
    result_class = _task_result_class()
    if result_class is not None:
        for source_is_module in (True, False):
            result_class.get_result_key_to_resolved_field_mapping(source_is_module=source_is_module)
            filled += 1
        for for_callback, for_round_trip in itertools.product((True, False), repeat=2):
            result_class._get_field_name_to_result_key_mapping(
                for_callback=for_callback, for_round_trip=for_round_trip
            )
            filled += 1
    for name in WORKER_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
            filled += 1
    used(NAME, filled)


ACCELERATION = Acceleration(
    name=NAME,
    saves="the imports every task's worker makes again and, from ansible-core 2.21, "
    "the task result's field mapping (type hints, ~20 ms), once per task",
    relies_on="the JSON profiles of ansible.module_utils._internal._json (2.19+); "
    "ansible._internal._task.UnifiedTaskResult's functools caches (2.21+)",
    probe=probe,
    installs=(Install(Phase.WARM_RUNNER, lambda _context: prefill()),),
    ansible_core_from=(2, 19),
)
