"""Plugins loaded once in the warm runner (acceleration `plugin-preload`).

What `ansible-playbook` does before its first task and that is the same for
every run: the collection loader, the inventory plugins, the connection,
shell and become plugins and the plugins nearly every run uses, found,
imported and their documented options parsed (YAML) once, here, instead of
in every run.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from ansible_operator.runner.environment import OWN_CALLBACKS
from ansible_operator.runner.warm.acceleration import Acceleration, Install, Phase, require, used

NAME = "plugin-preload"
PLUGINS = (
    ("strategy_loader", "linear"),
    ("action_loader", "normal"),
    ("action_loader", "command"),
    ("action_loader", "debug"),
    ("action_loader", "set_fact"),
    ("action_loader", "include_tasks"),
    ("action_loader", "kubernetes.core.k8s"),
    ("action_loader", "kubernetes.core.k8s_info"),
    ("lookup_loader", "kubernetes.core.k8s"),
)
LOADERS = (
    "connection_loader",
    "shell_loader",
    "become_loader",
    "inventory_loader",
    "callback_loader",
    "strategy_loader",
    "action_loader",
    "lookup_loader",
)


def probe() -> None:
    from ansible.plugins import loader

    require(callable(getattr(loader, "init_plugin_loader", None)), "init_plugin_loader is missing")
    missing = [name for name in LOADERS if not hasattr(loader, name)]
    require(not missing, f"ansible.plugins.loader has no {', '.join(missing)}")
    require(callable(getattr(loader, "get_plugin_class", None)), "get_plugin_class is missing")
    from ansible import constants

    config = constants.config
    require(
        callable(getattr(config, "has_configuration_definition", None))
        and callable(getattr(config, "initialize_plugin_configuration_definitions", None))
        and "callback" in getattr(constants, "CONFIGURABLE_PLUGINS", ()),
        "ansible's configuration manager records plugin definitions otherwise",
    )


def preload() -> None:
    from ansible import constants
    from ansible.plugins import callback as callback_package
    from ansible.plugins import loader

    loader.init_plugin_loader()
    loaded = 0
    # As ansible-playbook does first (playbook_executor.py), caching their options.
    for every in (loader.connection_loader, loader.shell_loader, loader.become_loader):
        loaded += len(list(every.all(class_only=True)))
    wanted = [("inventory_loader", name) for name in constants.INVENTORY_ENABLED]
    wanted += PLUGINS
    for loader_name, name in wanted:
        with contextlib.suppress(Exception):
            plugin_loader = getattr(loader, loader_name)
            if plugin_loader.get(name, class_only=True) is not None:
                loaded += 1
                _settle(plugin_loader, name)
    # Every run loads all callback plugins; not ansible-runner's (its import
    # reads the run's artifact directory), so only Ansible's own and ours, here.
    # Not the deprecated ones: loading one says so in the operator's log, and runs only
    # list them (a run that uses one gets Ansible's warning as usual).
    deprecated = _deprecated_builtin_callbacks()
    callbacks = [
        path
        for path in Path(callback_package.__file__).parent.glob("[!_]*.py")
        if path.stem not in deprecated
    ]
    callbacks += OWN_CALLBACKS.glob("[!_]*.py")
    for callback in callbacks:
        with contextlib.suppress(Exception):
            if loader.callback_loader.get(callback.stem, class_only=True) is not None:
                loaded += 1
                _settle(loader.callback_loader, callback.stem)
    used(NAME, loaded)


def _settle(plugin_loader: Any, name: str) -> None:
    """A plugin whose documentation declares no options has no definition
    in Ansible's configuration, so each process that gets it parses its
    documentation again (YAML, with doc fragments: ~1-2 ms each, ten a run).
    Its definition is empty: record it so. Only for a plugin that loaded
    here, so a run still fails on malformed documentation as it would."""
    from ansible import constants
    from ansible.plugins.loader import get_plugin_class

    kind = get_plugin_class(plugin_loader.class_name)
    if kind in constants.CONFIGURABLE_PLUGINS and not constants.config.has_configuration_definition(
        kind, name
    ):
        constants.config.initialize_plugin_configuration_definitions(kind, name, {})


def _deprecated_builtin_callbacks() -> set[str]:
    """ansible.builtin's callbacks its routing marks deprecated or removed."""
    try:
        from ansible.utils.collection_loader._collection_finder import _get_collection_metadata

        routing = _get_collection_metadata("ansible.builtin").get("plugin_routing") or {}
    except Exception:
        return set()
    return {
        name
        for name, entry in (routing.get("callback") or {}).items()
        if isinstance(entry, dict) and ("deprecation" in entry or "tombstone" in entry)
    }


ACCELERATION = Acceleration(
    name=NAME,
    saves="finding, importing and parsing the documentation of ~40 plugins in every run",
    relies_on="ansible.plugins.loader (init_plugin_loader and the plugin loaders' caches)",
    probe=probe,
    installs=(Install(Phase.WARM_RUNNER, lambda _context: preload()),),
)
