"""The operator's settings, in sections, each setting declared once (settings/declare.py).

settings/operator.py      Settings: the sections together
settings/<section>.py     one frozen dataclass per concern, its fields declaring
                          their flag, environment variable, parser and help
settings/flags.py         the `run` command line generated from the declarations
settings/precedence.py    annotation > watch > flag, in one function
"""

from ansible_operator.settings.ansible import AnsibleSettings
from ansible_operator.settings.leader_election import LeaderElectionSettings
from ansible_operator.settings.log import LogSettings
from ansible_operator.settings.operator import Settings
from ansible_operator.settings.proxy import ProxySettings
from ansible_operator.settings.runs import RunSettings
from ansible_operator.settings.serving import HealthSettings, MetricsSettings
from ansible_operator.settings.watching import WatchingSettings
from ansible_operator.settings.webhooks import WebhookSettings

__all__ = [
    "AnsibleSettings",
    "HealthSettings",
    "LeaderElectionSettings",
    "LogSettings",
    "MetricsSettings",
    "ProxySettings",
    "RunSettings",
    "Settings",
    "WatchingSettings",
    "WebhookSettings",
]
