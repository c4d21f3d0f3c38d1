"""Operator-wide settings (from `ansible-operator run` flags and the environment)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_RECONCILE_PERIOD = 10 * 3600.0
# Seconds. Neither the reference nor controller-runtime nor kopf has a floor,
# so an existing operator's short periods (a few seconds, to poll something
# outside the cluster) must keep working; one second is far below any of
# those, and above it an object costs at most about one run per second
# instead of a worker's whole time.
MIN_RECONCILE_PERIOD = 1.0
# A hung run holds a worker and an object forever without these.
DEFAULT_RUN_TIMEOUT = 3600.0
DEFAULT_MAX_RUN_OUTPUT = 32 * 2**20  # bytes of Ansible output per run
DEFAULT_RUN_MEMORY_LIMIT = 2**30  # bytes per run, where the operator may make cgroups
# How long the API server may be unreachable before /readyz, then /healthz, fail.
DEFAULT_API_SERVER_READY_GRACE = 30.0
DEFAULT_API_SERVER_LIVE_GRACE = 300.0


@dataclass
class OperatorOptions:
    watches_file: Path = Path("watches.yaml")
    kubeconfig: str | None = None
    impersonate: str | None = None  # --as: the user every request acts as
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
    run_timeout: float | None = DEFAULT_RUN_TIMEOUT
    max_run_output: int | None = DEFAULT_MAX_RUN_OUTPUT
    run_memory_limit: int | None = DEFAULT_RUN_MEMORY_LIMIT
    reconcile_run_nice: int = 10  # how far reconcile runs yield the CPU (runner/priority.py)
    proxy_port: int = 8888
    metrics_bind_address: str | None = None  # None: loopback unless metrics_secure
    metrics_secure: bool = False  # HTTPS, and TokenReview + SubjectAccessReview
    metrics_require_rbac: bool = False  # TokenReview + SubjectAccessReview (HTTP too)
    metrics_cert_path: Path | None = None  # tls.crt and tls.key; None: self-signed
    metrics_cert_name: str = "tls.crt"
    metrics_cert_key: str = "tls.key"
    health_probe_bind_address: str = ":6789"
    api_server_ready_grace: float = DEFAULT_API_SERVER_READY_GRACE  # 0: never fails /readyz
    api_server_live_grace: float = DEFAULT_API_SERVER_LIVE_GRACE  # 0: never fails /healthz
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
    # warm: modules run in forks of a warm interpreter (runner/warm/module_server.py);
    # reference: a fresh interpreter per task, as Operator SDK's operator does.
    runner_mode: str = "warm"
    # Warm-runner accelerations not to use (runner/warm/accelerations.py), by name.
    disabled_accelerations: tuple[str, ...] = ()
    # Admission webhooks (watches.yaml `- webhook:` entries; webhooks/service.py).
    webhook_bind_address: str = ":9443"  # '0': no webhook server
    webhook_cert_dir: Path | None = None  # tls.crt, tls.key (+ ca.crt); None: made here
    webhook_manage_configurations: bool = True  # apply the Mutating/Validating configurations
    webhook_configuration_name: str | None = None  # None: the leader election id
    webhook_service: str | None = None  # NAMESPACE/NAME[:PORT] the API server calls
    webhook_url: str | None = None  # a base URL the API server calls instead
    webhook_ca_secret: str | None = None  # NAMESPACE/NAME keeping the CA made here
    webhook_max_concurrent_runs: int | None = None  # None: twice the CPUs
    webhook_client_ca: Path | None = None  # PEM CA; given: clients must present a cert of it


def facts_skipped(environ: Mapping[str, str]) -> bool:
    """Whether role runs get `--role-skip-facts`; `run` and `reconcile` both ask
    here. As Operator SDK's operator: ANSIBLE_GATHERING=explicit skips facts,
    any other value gathers them. Unset, in a pod it gathers, as the reference
    does (the manifest decides: the scaffolded manager.yaml sets explicit);
    outside a cluster it skips, as that manifest makes the deployed operator
    do, so a local run behaves as deployed and does not spend seconds on facts."""
    gathering = environ.get("ANSIBLE_GATHERING", "").strip().lower()
    if gathering:
        return gathering == "explicit"
    return not environ.get("KUBERNETES_SERVICE_HOST")


def unquoted(ansible_args: str) -> str:
    """`--ansible-args` as a manifest passes it: `args: ["--ansible-args='-e x=1'"]`
    reaches us with the quotes, there being no shell. Operator SDK strips one
    pair of quotes around the whole value; so do we."""
    text = ansible_args.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text
