"""Module payloads built before the first run needs them (acceleration `payload-prebuild`).

A run builds the payload of each module it uses the first time (see
shared_payload_cache.py): ~0.3 s per module, which would make the first reconcile
after start-up pay for them. Once the warm runner is ready, a fork of it
loads each watch's role or playbook as Ansible does (static imports, role
dependencies, role library modules), finds the module of each task, and
builds its payload into the cache the runs of that watch will use. Best
effort: whatever it cannot resolve (a dynamic include, a templated action),
a run builds as usual; a run that needs a payload being built waits for it
(Ansible locks the cache entry).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Context,
    Install,
    Phase,
    parameters_of,
    require,
    used,
)
from ansible_operator.runner.warm.accelerations.shared_payload_cache import (
    CACHE_NAME,
    roles_identity,
    share_payload_cache,
)
from ansible_operator.runner.warm.ansible_settings import reread_ansible_settings

NAME = "payload-prebuild"
MODIFY_MODULE_ARGUMENTS = (
    "module_name",
    "module_path",
    "module_args",
    "templar",
    "task_vars",
    "module_compression",
    "remote_is_local",
)


def probe() -> None:
    from ansible.executor import module_common
    from ansible.playbook import Playbook
    from ansible.playbook.play import Play
    from ansible.plugins.loader import module_loader

    modify_module = getattr(module_common, "modify_module", None)
    require(callable(modify_module), "ansible's module_common.modify_module is missing")
    missing = set(MODIFY_MODULE_ARGUMENTS) - parameters_of(modify_module)  # type: ignore[arg-type]
    require(not missing, f"modify_module takes no {', '.join(sorted(missing))}")
    require(
        callable(getattr(module_loader, "find_plugin_with_context", None)),
        "module_loader.find_plugin_with_context is missing",
    )
    require(
        callable(getattr(Playbook, "load", None)) and callable(getattr(Play, "load", None)),
        "Playbook.load or Play.load is missing",
    )


def _tasks(blocks: list[Any]) -> Iterator[Any]:
    from ansible.playbook.block import Block

    for item in blocks:
        if isinstance(item, Block):
            yield from _tasks([*item.block, *item.rescue, *item.always])
        else:
            yield item


def _plays(target: dict[str, str], loader: Any, variables: Any) -> list[Any]:
    from ansible.playbook import Playbook
    from ansible.playbook.play import Play

    if "role" in target:
        role = Path(target["role"])
        play = {"hosts": "localhost", "gather_facts": False, "roles": [{"name": role.name}]}
        return [Play().load(play, variable_manager=variables, loader=loader)]
    return Playbook.load(target["playbook"], variable_manager=variables, loader=loader).get_plays()


def _build(task: Any, templar: Any) -> None:
    from ansible import constants
    from ansible.executor.module_common import modify_module
    from ansible.plugins.loader import module_loader

    context = module_loader.find_plugin_with_context(task.action, collection_list=task.collections)
    if not context.resolved or not str(context.plugin_resolved_path).endswith(".py"):
        return
    with contextlib.suppress(Exception):  # past the payload: the interpreter, irrelevant here
        modify_module(
            module_name=task.action,
            module_path=context.plugin_resolved_path,
            module_args={},
            templar=templar,
            task_vars={"ansible_python_interpreter": sys.executable},
            module_compression=constants.config.get_config_value("DEFAULT_MODULE_COMPRESSION"),
            remote_is_local=True,
        )


def prebuild_target(payload_root: Path, target: dict[str, str]) -> None:
    """One watch's role or playbook, with the settings its runs will have."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    if "role" in target:
        role = Path(target["role"])
        os.environ["ANSIBLE_ROLES_PATH"] = str(role.parent)  # as ansible-runner sets it
        # The playbook ansible-runner writes lives in a project directory of
        # its own: no library or roles beside it (nor here).
        playbook = payload_root / "no-project" / ("0" * 32)
        identity: bytes | None = roles_identity([role.name])
    else:
        playbook, identity = Path(target["playbook"]), None
    reread_ansible_settings()
    share_payload_cache(payload_root, playbook, identity)
    from ansible import constants

    cache = Path(constants.DEFAULT_LOCAL_TMP) / CACHE_NAME
    before = _entries(cache)
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources="localhost,")
    variables = VariableManager(loader=loader, inventory=inventory)
    templar = Templar(loader=loader)
    built: set[str] = set()
    for play in _plays(target, loader, variables):
        for task in _tasks(play.compile()):
            if task.action not in built:
                built.add(task.action)
                _build(task, templar)
    used(NAME, max(0, _entries(cache) - before))


def _entries(cache: Path) -> int:
    """Payloads in the cache (not their lock files)."""
    try:
        return sum(1 for entry in cache.iterdir() if not entry.name.endswith((".lock", "-part")))
    except OSError:
        return 0


def prebuild(payload_root: Path, targets: list[dict[str, str]]) -> None:
    """Each target in a fork of its own: settings and loaded roles do not mix."""
    for target in targets:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                prebuild_target(payload_root, target)
            except Exception:
                code = 1
            finally:
                import atexit

                with contextlib.suppress(Exception):
                    atexit._run_exitfuncs()  # Ansible's local temporary directory
                os._exit(code)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _prebuild(context: Context) -> None:
    prebuild(context.scratch / "payloads", list(context.targets))


ACCELERATION = Acceleration(
    name=NAME,
    saves="~0.3 s per module on the first reconcile after start-up: payloads built "
    "ahead, while nothing runs",
    relies_on="module_common.modify_module(...), module_loader.find_plugin_with_context, "
    "Playbook.load, Play.load",
    probe=probe,
    installs=(Install(Phase.BACKGROUND, _prebuild),),
)
