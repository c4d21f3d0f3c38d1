"""A warm run reads again only the Ansible settings it can read otherwise
(acceleration `settings-read-once`).

A run's ansible-playbook is a fork of the warm runner, which read Ansible's
~220 settings at import; the run reads them all again (~15 ms: their
defaults are templates), in its own working directory and environment
(ansible_settings.py). Most read as the warm runner read them: only the
runtime settings the run sets otherwise, those that follow the working
directory (a relative path resolves against it) and the temporary
directories made per process can differ, and a run reads only those; one
with any other difference (or another HOME) reads them all.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    enabled,
    require,
    used,
)
from ansible_operator.runner.warm.ansible_settings import (
    preload_home,
    runtime_settings_changed,
    stale_settings,
)

NAME = "settings-read-once"
TEMPORARY_TYPES = ("tmppath", "temppath", "tmp")
_per_directory: set[str] = set()  # see note_settings_per_directory


def read_otherwise(run_env: Mapping[str, str]) -> set[str] | None:
    """The settings a run with this environment reads otherwise than the warm
    runner did: the runtime settings it sets otherwise, those that follow the
    working directory and the temporary ones. None: it may read any otherwise."""
    if stale_settings(run_env) or run_env.get("HOME", "") != preload_home():
        return None
    return runtime_settings_changed(run_env) | _per_directory


def to_reread(run_env: Mapping[str, str]) -> set[str] | None:
    """In a run's fork: the settings to read again (None: all of them)."""
    if not enabled(NAME):
        return None
    changed = read_otherwise(run_env)
    if changed is not None:
        used(NAME)
    return changed


def note_settings_per_directory() -> None:
    """In the warm runner, with Ansible imported: which settings a run reads
    otherwise only because it runs elsewhere (a relative path in a setting
    resolves against the working directory) or in another process (a
    temporary path is made per process). Read here and in another directory."""
    from ansible import constants

    definitions = constants.config.get_configuration_definitions()
    temporary = {s for s, d in definitions.items() if d.get("type") in TEMPORARY_TYPES}
    readable = [setting for setting in definitions if setting not in temporary]
    here = _values(readable)
    before = Path.cwd()
    with tempfile.TemporaryDirectory() as elsewhere:
        os.chdir(elsewhere)
        try:
            there = _values(readable)
        finally:
            os.chdir(before)
    _per_directory.clear()
    _per_directory.update(temporary)
    _per_directory.update(setting for setting in readable if here[setting] != there[setting])


def _values(settings: list[str]) -> dict[str, object]:
    from ansible import constants

    return {
        setting: constants.config.get_config_value(setting, variables=vars(constants))
        for setting in settings
    }


def probe() -> None:
    from ansible import constants

    definitions = constants.config.get_configuration_definitions()
    require(
        isinstance(definitions, dict) and "DEFAULT_LOCAL_TMP" in definitions,
        "ansible's configuration definitions are not a mapping with DEFAULT_LOCAL_TMP",
    )
    require(
        definitions["DEFAULT_LOCAL_TMP"].get("type") in TEMPORARY_TYPES,
        "DEFAULT_LOCAL_TMP is no longer a temporary path made per process",
    )
    require(callable(getattr(constants, "set_constant", None)), "constants.set_constant is missing")


ACCELERATION = Acceleration(
    name=NAME,
    saves="reading ~220 Ansible settings again in every run (~15 ms): only those a run "
    "can read otherwise",
    relies_on="ansible.constants.config's definitions (their types) and set_constant",
    probe=probe,
    installs=(Install(Phase.WARM_RUNNER, lambda _context: note_settings_per_directory()),),
)
