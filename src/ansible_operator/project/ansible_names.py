"""The variable names the installed ansible-core gives a meaning of its own, read from
ansible-core itself, not from a list of ours: a release that adds one (2.21's
``_task``) has it refused without a change here.

Gathered in a child process (`python -m ansible_operator.project.ansible_names`, ~1 s
of CPU): loading every connection, become and shell plugin's documentation leaves
~11 MB in the process that does it, which the operator should not keep. The result is
kept in the user's cache directory (`~/.cache/ansible-operator/ansible-names-*.json`),
keyed by the interpreter, the release and the plugin paths, so later starts on the
same installation read it instead. What is gathered:

- the names its variable manager gives a task of a role in a play on localhost
  (``playbook_dir``, ``role_path``, ``groups``, ...), and those its task context adds
  while the task runs (2.21: ``_task``);
- its constants' lists: internal static variables, connection variables, the magic
  variable mapping (``ansible_host``, ``ansible_ssh_user``, ...);
- the global values of its templating (``omit``): a variable of that name shadows
  the global in every template (``default(omit)`` would pass it on);
- every variable a connection, become or shell plugin reads its options from, as
  the plugin's documentation declares them (``ansible_become_exe``, ...).

Every name starting with ``ansible_``, ``_ansible_`` or ``__ansible`` is refused
whether listed or not (reserved_vars.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


@dataclass(frozen=True)
class AnsibleNames:
    version: str  # of ansible-core
    names: frozenset[str]


# -- the parent ------------------------------------------------------------------------
_COMMAND = [sys.executable, "-m", "ansible_operator.project.ansible_names"]
_cached: AnsibleNames | None = None


def _parse(output: str | bytes) -> AnsibleNames:
    data = json.loads(output)
    return AnsibleNames(data["version"], frozenset(data["names"]))


def _failed(detail: str) -> RuntimeError:
    return RuntimeError(f"could not read ansible-core's variable names: {detail}")


def _cache_file(env: Mapping[str, str] | None) -> Path | None:
    """Where the names read for this installation are kept between starts (~1 s of CPU
    each), keyed by what they depend on: the interpreter, the ansible-core release and
    the plugin paths the environment adds; None when there is no cache directory."""
    given = os.environ if env is None else env
    try:
        release = metadata.version("ansible-core")
    except metadata.PackageNotFoundError:
        return None
    key = json.dumps(
        [sys.executable, release, sorted((k, v) for k, v in given.items() if "PLUGIN" in k)]
    )
    try:
        base = Path(given.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except RuntimeError:  # no home directory
        return None
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return base / "ansible-operator" / f"ansible-names-{release}-{digest}.json"


def _cached_on_disk(env: Mapping[str, str] | None) -> AnsibleNames | None:
    path = _cache_file(env)
    if path is None:
        return None
    try:
        return _parse(path.read_bytes())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _keep_on_disk(env: Mapping[str, str] | None, output: bytes) -> None:
    path = _cache_file(env)
    if path is None:
        return
    with contextlib.suppress(OSError):  # no cache is only slower
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_bytes(output)
        partial.replace(path)


def reserved_by_ansible(env: dict[str, str] | None = None) -> AnsibleNames:
    """The installed ansible-core's names (read once per installation)."""
    global _cached
    if _cached is None:
        _cached = _cached_on_disk(env)
    if _cached is None:
        done = subprocess.run(_COMMAND, capture_output=True, check=False, env=env, timeout=300)
        if done.returncode != 0:
            raise _failed(done.stderr.decode(errors="replace").strip()[-2000:])
        _cached = _parse(done.stdout)
        _keep_on_disk(env, done.stdout)
    return _cached


async def read_reserved_by_ansible(env: dict[str, str] | None = None) -> AnsibleNames:
    """`reserved_by_ansible`, without blocking the event loop."""
    global _cached
    if _cached is None:
        _cached = _cached_on_disk(env)
    if _cached is None:
        process = await asyncio.create_subprocess_exec(
            *_COMMAND,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
            env=env,
        )
        output, errors = await process.communicate()
        if process.returncode != 0:
            raise _failed(errors.decode(errors="replace").strip()[-2000:])
        _cached = _parse(output)
        _keep_on_disk(env, output)
    return _cached


# -- the child -------------------------------------------------------------------------
def _variable_manager_names() -> set[str]:
    """What a task of a role sees before any variable of the play's own."""
    from ansible import context
    from ansible.inventory.manager import InventoryManager
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook.play import Play
    from ansible.vars.manager import VariableManager

    context.CLIARGS = ImmutableDict(
        connection="local", forks=1, check=False, diff=False, verbosity=0, tags=(), skip_tags=()
    )
    with tempfile.TemporaryDirectory() as directory:
        tasks = Path(directory, "roles", "probe", "tasks")
        tasks.mkdir(parents=True)
        (tasks / "main.yml").write_text("- debug: msg=probe\n")
        loader = DataLoader()
        loader.set_basedir(directory)
        inventory = InventoryManager(loader=loader, sources="localhost,")
        manager = VariableManager(loader=loader, inventory=inventory)
        play = Play.load(
            {"hosts": "localhost", "gather_facts": False, "roles": ["probe"]},
            variable_manager=manager,
            loader=loader,
        )
        task = next(
            (t for block in play.compile() for t in block.block if getattr(t, "_role", None)),
            None,
        )
        host = inventory.get_host("localhost")
        names = set(manager.get_vars(play=play, host=host, task=task, include_hostvars=True))
        names |= _task_context_names(task, host)
    return names


def _task_context_names(task: object, host: object) -> set[str]:
    """Names a task's variables gain while it runs (ansible-core 2.21: `_task`)."""
    try:
        from ansible._internal._task import TaskContext  # type: ignore[import-not-found]
    except ImportError:
        return set()
    task_vars: dict[str, object] = {}
    try:
        TaskContext.create(task, task_vars, "localhost")
    except Exception:  # its signature changed: the names found otherwise stand
        return set()
    return set(task_vars)


def _constants_names() -> set[str]:
    from ansible import constants

    names: set[str] = set(getattr(constants, "INTERNAL_STATIC_VARS", ()))
    names |= set(getattr(constants, "COMMON_CONNECTION_VARS", ()))
    for spellings in getattr(constants, "MAGIC_VARIABLE_MAPPING", {}).values():
        names |= set(spellings)
    return names


def _template_values() -> set[str]:
    """The templating's global values (``omit``). Its global functions (``lookup``,
    ``namespace``, ``range``, ...) are left: data of that name only breaks the
    templates that call it, and `namespace` or `range` are common spec fields."""
    try:  # 2.19+
        from ansible._internal._templating._engine import TemplateEngine

        globals_ = TemplateEngine().environment.globals
    except ImportError:  # 2.18
        from ansible.parsing.dataloader import DataLoader
        from ansible.template import Templar

        globals_ = Templar(loader=DataLoader()).environment.globals
    return {name for name, value in globals_.items() if not callable(value)}


def _plugin_option_names() -> set[str]:
    from ansible import constants
    from ansible.plugins import loader as plugins

    init: Callable[[], None] | None = getattr(plugins, "init_plugin_loader", None)
    if init is not None:
        init()
    names: set[str] = set()
    for plugin_loader in (plugins.become_loader, plugins.connection_loader, plugins.shell_loader):
        for plugin in plugin_loader.all(class_only=True):
            name = getattr(plugin, "_load_name", None)
            definitions = constants.config.get_configuration_definitions(plugin_loader.type, name)
            names |= set(_declared_vars((definitions or {}).values()))
    return names


def _declared_vars(options: Iterable[dict[str, object]]) -> Iterable[str]:
    for option in options:
        for entry in option.get("vars") or ():  # type: ignore[union-attr]
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                yield entry["name"]


def gather() -> AnsibleNames:
    from ansible.release import __version__

    names = (
        _variable_manager_names() | _constants_names() | _template_values() | _plugin_option_names()
    )
    return AnsibleNames(__version__, frozenset(names))


def main() -> None:
    os.environ.setdefault("ANSIBLE_DEPRECATION_WARNINGS", "false")
    found = gather()
    json.dump({"version": found.version, "names": sorted(found.names)}, sys.stdout)


if __name__ == "__main__":
    main()
