"""All the operator's settings: one frozen section per concern, as kopf's OperatorSettings.

Code reads the section it needs (`settings.runs.run_timeout`) and is given
that section where it needs no other.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

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


def sections() -> list[tuple[str, type]]:
    """(attribute, section class) of each section of Settings, in order."""
    return [
        (each.name, each.default_factory)  # type: ignore[misc]
        for each in dataclasses.fields(Settings)
    ]
