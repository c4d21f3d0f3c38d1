"""Operator-wide settings (from `ansible-operator run` flags and the environment)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_RECONCILE_PERIOD = 10 * 3600.0


@dataclass
class OperatorOptions:
    watches_file: Path = Path("watches.yaml")
    kubeconfig: str | None = None
    inject_owner_ref: bool = True
    ansible_verbosity: int = 2
    ansible_roles_path: str | None = None
    ansible_collections_path: str | None = None
    ansible_args: str = ""
    ansible_log_events: str = "tasks"  # tasks | everything | nothing
    ansible_debug_logs: bool = False  # log Ansible's own output (ANSIBLE_DEBUG_LOGS)
    reconcile_period: float = DEFAULT_RECONCILE_PERIOD
    max_concurrent_reconciles: int = field(default_factory=lambda: os.cpu_count() or 1)
    max_concurrent_runs: int | None = None  # global cap across watches; None = sum of watches'
    run_timeout: float | None = None
    proxy_port: int = 8888
    metrics_bind_address: str = ":8443"
    health_probe_bind_address: str = ":6789"
    leader_elect: bool = False
    leader_election_id: str = "ansible-operator"
    leader_election_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    graceful_shutdown_timeout: float = 30.0
    watch_namespaces: list[str] = field(default_factory=list)  # empty = all
    runner_dir: Path | None = None
    inventory: Path | None = None
    skip_facts: bool = True
    check_mode: bool = False
    # warm: modules run in forks of a warm interpreter (runner/module_server.py);
    # reference: a fresh interpreter per task, as Operator SDK's operator does.
    runner_mode: str = "warm"
