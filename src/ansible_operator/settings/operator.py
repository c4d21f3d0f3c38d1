"""All the operator's settings: one frozen section per concern, as kopf's OperatorSettings.

Code reads the section it needs (`settings.runs.run_timeout`) and is given
that section where it needs no other. The flat names of the former
`OperatorOptions` (`settings.ansible_verbosity`) still read, through
`FLAT_NAMES`, while callers move to sections; new settings get no flat name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.settings.ansible import AnsibleSettings
from ansible_operator.settings.leader_election import LeaderElectionSettings
from ansible_operator.settings.log import LogSettings
from ansible_operator.settings.proxy import ProxySettings
from ansible_operator.settings.runs import RunSettings
from ansible_operator.settings.serving import HealthSettings, MetricsSettings
from ansible_operator.settings.watching import WatchingSettings
from ansible_operator.settings.webhooks import WebhookSettings


@dataclass(frozen=True)
class Settings:
    watching: WatchingSettings = field(default_factory=WatchingSettings)
    ansible: AnsibleSettings = field(default_factory=AnsibleSettings)
    runs: RunSettings = field(default_factory=RunSettings)
    proxy: ProxySettings = field(default_factory=ProxySettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    log: LogSettings = field(default_factory=LogSettings)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not sections: the transition's flat names.
        place = FLAT_NAMES.get(name)
        if place is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        section, setting = place
        return getattr(getattr(self, section), setting)


def sections() -> list[tuple[str, type]]:
    """(attribute, section class) of each section of Settings, in order."""
    return [
        (each.name, each.default_factory)  # type: ignore[misc]
        for each in dataclasses.fields(Settings)
    ]


def _same(section: str, *names: str) -> dict[str, tuple[str, str]]:
    return {name: (section, name) for name in names}


# Transition: the former OperatorOptions' names -> (section, setting).
FLAT_NAMES: dict[str, tuple[str, str]] = {
    **_same("watching", "watches_file", "kubeconfig", "impersonate"),
    "watch_namespaces": ("watching", "namespaces"),
    "ansible_verbosity": ("ansible", "verbosity"),
    "ansible_roles_path": ("ansible", "roles_path"),
    "ansible_collections_path": ("ansible", "collections_path"),
    "ansible_args": ("ansible", "args"),
    "ansible_log_events": ("ansible", "log_events"),
    "ansible_debug_logs": ("ansible", "debug_logs"),
    **_same("ansible", "inventory", "skip_facts", "check_mode"),
    **_same(
        "runs",
        "reconcile_period",
        "max_concurrent_reconciles",
        "max_concurrent_runs",
        "run_timeout",
        "max_run_output",
        "run_memory_limit",
        "reconcile_run_nice",
        "graceful_shutdown_timeout",
        "runner_dir",
        "runner_mode",
        "disabled_accelerations",
    ),
    "proxy_port": ("proxy", "port"),
    "inject_owner_ref": ("proxy", "inject_owner_ref"),
    "metrics_bind_address": ("metrics", "bind_address"),
    "metrics_secure": ("metrics", "secure"),
    "metrics_require_rbac": ("metrics", "require_rbac"),
    "metrics_cert_path": ("metrics", "cert_path"),
    "metrics_cert_name": ("metrics", "cert_name"),
    "metrics_cert_key": ("metrics", "cert_key"),
    "health_probe_bind_address": ("health", "probe_bind_address"),
    **_same("health", "api_server_ready_grace", "api_server_live_grace"),
    "leader_elect": ("leader_election", "enabled"),
    "leader_election_id": ("leader_election", "id"),
    "leader_election_namespace": ("leader_election", "namespace"),
    **_same("leader_election", "lease_duration", "renew_deadline", "retry_period"),
    "webhook_bind_address": ("webhooks", "bind_address"),
    "webhook_cert_dir": ("webhooks", "cert_dir"),
    "webhook_manage_configurations": ("webhooks", "manage_configurations"),
    "webhook_configuration_name": ("webhooks", "configuration_name"),
    "webhook_service": ("webhooks", "service"),
    "webhook_url": ("webhooks", "url"),
    "webhook_ca_secret": ("webhooks", "ca_secret"),
    "webhook_max_concurrent_runs": ("webhooks", "max_concurrent_runs"),
    "webhook_client_ca": ("webhooks", "client_ca"),
}
