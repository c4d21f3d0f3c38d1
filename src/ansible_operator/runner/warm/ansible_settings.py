"""Ansible's settings in the warm runner and its runs.

Ansible reads its configuration into `ansible.constants` and its plugin
loaders when it is imported. The warm runner imports it with the settings a
run gets; a run may differ from that only in settings Ansible reads through
`ansible.constants` while it runs, which are read again in the run's fork:
all of them, or with acceleration `settings-read-once` only those the run can
read otherwise.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    enabled,
    require,
    used,
)

SETTINGS_READ_ONCE = "settings-read-once"
TEMPORARY_TYPES = ("tmppath", "temppath", "tmp")

# Ansible settings that Ansible reads through `ansible.constants` while it
# runs (not into plugin loaders at import): a run may differ from the server
# in these, they are re-read in the run's fork. By environment variable, with
# the setting each must still be in the installed release (else a run whose
# value differs gets a fresh ansible-playbook, as for any other setting).
RUNTIME_SETTINGS = {
    "ANSIBLE_ROLES_PATH": "DEFAULT_ROLES_PATH",
    "ANSIBLE_CACHE_PLUGIN_CONNECTION": "CACHE_PLUGIN_CONNECTION",
}
_runtime_settings: set[str] = set()  # those of RUNTIME_SETTINGS this release has
_preload_settings: dict[str, str] = {}
_setting_names: set[str] = {"ANSIBLE_CONFIG"}  # filled from Ansible's definitions
_preload_home = ""
_per_directory: set[str] = set()  # see note_settings_per_directory


def ansible_settings(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key in _setting_names}


def remember_preload_settings(env: dict[str, str]) -> None:
    """In the warm runner, before it imports Ansible: what it imports with."""
    from ansible import constants

    definitions = constants.config.get_configuration_definitions()
    for definition in definitions.values():
        _setting_names.update(entry["name"] for entry in definition.get("env") or ())
    for variable, setting in RUNTIME_SETTINGS.items():
        names = {entry["name"] for entry in (definitions.get(setting) or {}).get("env") or ()}
        if variable in names:
            _runtime_settings.add(variable)
    _preload_settings.update(ansible_settings(env))
    global _preload_home
    _preload_home = env.get("HOME", "")


def stale_settings(run_env: dict[str, str]) -> set[str]:
    """Ansible settings of a run that differ from the warm runner's and that
    Ansible read at import: such a run needs a fresh ansible-playbook."""
    ours = ansible_settings(run_env)
    keys = ours.keys() | _preload_settings.keys()
    differing = {key for key in keys if ours.get(key) != _preload_settings.get(key)}
    return differing - _runtime_settings


def reread_ansible_settings(run_env: dict[str, str] | None = None) -> None:
    """In a run's fork, with the run's environment and working directory in
    place. Without `run_env`, or without acceleration `settings-read-once`,
    every setting (~15 ms: defaults are templates); with them, only those a
    run can read otherwise than the warm runner did (`_read_otherwise`)."""
    from ansible import constants

    definitions = constants.config.get_configuration_definitions()
    settings = list(definitions)
    if run_env is not None and enabled(SETTINGS_READ_ONCE):
        changed = _read_otherwise(run_env)
        if changed is not None:
            settings = [setting for setting in settings if setting in changed]
            used(SETTINGS_READ_ONCE)
    for setting in settings:
        constants.set_constant(
            setting, constants.config.get_config_value(setting, variables=vars(constants))
        )


def _read_otherwise(run_env: dict[str, str]) -> set[str] | None:
    """The settings a run with this environment reads otherwise than the warm
    runner did: the runtime settings it sets otherwise, those that follow the
    working directory and the temporary ones. None: it may read any otherwise."""
    if stale_settings(run_env) or run_env.get("HOME", "") != _preload_home:
        return None
    ours = ansible_settings(run_env)
    runtime = {
        RUNTIME_SETTINGS[variable]
        for variable in _runtime_settings
        if ours.get(variable) != _preload_settings.get(variable)
    }
    return runtime | _per_directory


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


SETTINGS_ACCELERATION = Acceleration(
    name=SETTINGS_READ_ONCE,
    saves="reading ~220 Ansible settings again in every run (~15 ms): only those a run "
    "can read otherwise",
    relies_on="ansible.constants.config's definitions (their types) and set_constant",
    probe=probe,
    installs=(Install(Phase.WARM_RUNNER, lambda _context: note_settings_per_directory()),),
)
