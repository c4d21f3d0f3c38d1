"""Ansible's settings in the warm runner and its runs.

Ansible reads its configuration into `ansible.constants` and its plugin
loaders when it is imported. The warm runner imports it with the settings a
run gets; a run may differ from that only in settings Ansible reads through
`ansible.constants` while it runs, which are read again in the run's fork.
"""

from __future__ import annotations

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


def stale_settings(run_env: dict[str, str]) -> set[str]:
    """Ansible settings of a run that differ from the warm runner's and that
    Ansible read at import: such a run needs a fresh ansible-playbook."""
    ours = ansible_settings(run_env)
    keys = ours.keys() | _preload_settings.keys()
    differing = {key for key in keys if ours.get(key) != _preload_settings.get(key)}
    return differing - _runtime_settings


def reread_ansible_settings() -> None:
    """In a run's fork, with the run's environment in place."""
    from ansible import constants

    for setting in constants.config.get_configuration_definitions():
        constants.set_constant(
            setting, constants.config.get_config_value(setting, variables=vars(constants))
        )
