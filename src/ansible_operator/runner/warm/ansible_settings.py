"""Ansible's settings in the warm runner and its runs.

Ansible reads its configuration into `ansible.constants` and its plugin
loaders when it is imported. The warm runner imports it with the settings a
run gets (`remember_preload_settings`); a run may differ from that only in
settings Ansible reads through `ansible.constants` while it runs, which are
read again in the run's fork (`reread_ansible_settings`: all of them, or
with acceleration `settings-read-once` only those the run can read
otherwise); a run that differs in any other (`stale_settings`) starts a
fresh ansible-playbook (accelerations/playbook_in_fork.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

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


def ansible_settings(env: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key in _setting_names}


def remember_preload_settings(env: Mapping[str, str]) -> None:
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


def preload_home() -> str:
    """The HOME the warm runner imported Ansible with."""
    return _preload_home


def stale_settings(run_env: Mapping[str, str]) -> set[str]:
    """Ansible settings of a run that differ from the warm runner's and that
    Ansible read at import: such a run needs a fresh ansible-playbook."""
    ours = ansible_settings(run_env)
    keys = ours.keys() | _preload_settings.keys()
    differing = {key for key in keys if ours.get(key) != _preload_settings.get(key)}
    return differing - _runtime_settings


def runtime_settings_changed(run_env: Mapping[str, str]) -> set[str]:
    """The runtime settings (by their names in `ansible.constants`) a run with
    this environment sets otherwise than the warm runner."""
    ours = ansible_settings(run_env)
    return {
        RUNTIME_SETTINGS[variable]
        for variable in _runtime_settings
        if ours.get(variable) != _preload_settings.get(variable)
    }


def reread_ansible_settings(only: Collection[str] | None = None) -> None:
    """In a run's fork, with the run's environment and working directory in
    place: every setting (~15 ms: defaults are templates), or `only` those."""
    from ansible import constants

    settings = list(constants.config.get_configuration_definitions())
    if only is not None:
        settings = [setting for setting in settings if setting in only]
    for setting in settings:
        constants.set_constant(
            setting, constants.config.get_config_value(setting, variables=vars(constants))
        )
