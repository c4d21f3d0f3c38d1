"""Transition: the former home of the operator's settings, now `ansible_operator.settings`.

`OperatorOptions` is `Settings`, whose flat names (`options.ansible_verbosity`)
still read while callers move to its sections (`settings.ansible.verbosity`).
New code imports from `ansible_operator.settings`.
"""

from __future__ import annotations

from ansible_operator.settings.ansible import facts_skipped, unquoted
from ansible_operator.settings.operator import Settings
from ansible_operator.settings.runs import (
    DEFAULT_MAX_RUN_OUTPUT,
    DEFAULT_RECONCILE_PERIOD,
    DEFAULT_RUN_MEMORY_LIMIT,
    DEFAULT_RUN_TIMEOUT,
    MIN_RECONCILE_PERIOD,
)
from ansible_operator.settings.serving import (
    DEFAULT_API_SERVER_LIVE_GRACE,
    DEFAULT_API_SERVER_READY_GRACE,
)

OperatorOptions = Settings

__all__ = [
    "DEFAULT_API_SERVER_LIVE_GRACE",
    "DEFAULT_API_SERVER_READY_GRACE",
    "DEFAULT_MAX_RUN_OUTPUT",
    "DEFAULT_RECONCILE_PERIOD",
    "DEFAULT_RUN_MEMORY_LIMIT",
    "DEFAULT_RUN_TIMEOUT",
    "MIN_RECONCILE_PERIOD",
    "OperatorOptions",
    "facts_skipped",
    "unquoted",
]
