"""`ansible-operator run`: the reference's flags, names and defaults.

Go-style flags are accepted as the reference's users write them:
`--leader-elect`, `--leader-elect=true`, `--inject-owner-ref=false`,
`--reconcile-period=1m30s`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ansible_operator import __version__, logs
from ansible_operator.durations import DurationError, parse_duration
from ansible_operator.options import (
    DEFAULT_API_SERVER_LIVE_GRACE,
    DEFAULT_API_SERVER_READY_GRACE,
    DEFAULT_MAX_RUN_OUTPUT,
    DEFAULT_RECONCILE_PERIOD,
    DEFAULT_RUN_MEMORY_LIMIT,
    DEFAULT_RUN_TIMEOUT,
    OperatorOptions,
    facts_skipped,
    unquoted,
)
from ansible_operator.runner.versions import installed_versions, one_line
from ansible_operator.runner.warm.accelerations import acceleration_names
from ansible_operator.sizes import SizeError, parse_size

log = logging.getLogger("ansible_operator")

TRUE = {"true", "1", "yes", "t"}
FALSE = {"false", "0", "no", "f"}


def go_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def go_duration(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def size(text: str) -> int:
    try:
        return parse_size(text)
    except SizeError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_bool(parser: argparse.ArgumentParser, *names: str, default: bool, help: str) -> None:
    parser.add_argument(
        *names,
        type=go_bool,
        nargs="?",
        const=True,
        default=default,
        metavar="BOOL",
        help=f"{help} (default: {str(default).lower()})",
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--watches-file",
        type=Path,
        default=Path("watches.yaml"),
        help="path to the watches file (default: %(default)s)",
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig to use (default: KUBECONFIG, ~/.kube/config or in-cluster)",
    )
    add_impersonation_argument(parser)
    add_bool(
        parser,
        "--inject-owner-ref",
        default=True,
        help="inject owner references into what runs create",
    )
    parser.add_argument(
        "--ansible-verbosity",
        type=int,
        default=2,
        choices=range(8),
        metavar="0-7",
        help="Ansible verbosity (default: %(default)s)",
    )
    parser.add_argument(
        "--ansible-roles-path", default=None, help="ANSIBLE_ROLES_PATH for runs and role lookup"
    )
    parser.add_argument(
        "--ansible-collections-path",
        default=None,
        help="ANSIBLE_COLLECTIONS_PATH for runs and role lookup",
    )
    parser.add_argument(
        "--ansible-args", default="", help="extra ansible-playbook arguments, e.g. '--tags x'"
    )
    parser.add_argument(
        "--ansible-log-events",
        choices=("tasks", "everything", "nothing"),
        default="tasks",
        help="which Ansible events to log (default: %(default)s)",
    )
    parser.add_argument(
        "--reconcile-period",
        type=go_duration,
        default=DEFAULT_RECONCILE_PERIOD,
        metavar="DURATION",
        help="default requeue period after success (10h)",
    )
    parser.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="workers per watch (default: number of CPUs)",
    )
    parser.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=None,
        metavar="N",
        help="global cap on Ansible runs across all watches "
        "(default: the sum of the watches' workers)",
    )
    parser.add_argument(
        "--run-timeout",
        type=go_duration,
        default=DEFAULT_RUN_TIMEOUT,
        metavar="DURATION",
        help="kill a run that takes longer (default: 1h; 0: never; per watch: runTimeout)",
    )
    parser.add_argument(
        "--max-run-output",
        type=size,
        default=DEFAULT_MAX_RUN_OUTPUT,
        metavar="SIZE",
        help="stop a run that prints more Ansible output (default: 32Mi; 0: no cap)",
    )
    parser.add_argument(
        "--run-memory-limit",
        type=size,
        default=DEFAULT_RUN_MEMORY_LIMIT,
        metavar="SIZE",
        help="memory of all a run's processes, where cgroups allow (default: 1Gi; 0: no cap)",
    )
    parser.add_argument(
        "--reconcile-run-nice",
        type=int,
        choices=range(20),
        default=10,
        metavar="0..19",
        help="nice increment of reconcile runs' processes, so that the operator itself and "
        "admission runs get the CPU first when it runs out (default: 10; 0: as the operator)",
    )
    parser.add_argument(
        "--proxy-port",
        type=int,
        default=8888,
        help="API proxy port on 127.0.0.1 (0: any free port)",
    )
    parser.add_argument(
        "--metrics-bind-address",
        "--metrics-addr",
        default=None,
        help="metrics server address ('0' disables; default: :8443 with --metrics-secure, "
        "else 127.0.0.1:8443)",
    )
    add_bool(
        parser,
        "--metrics-secure",
        default=False,
        help="serve metrics over HTTPS to clients the API server authenticates "
        "(TokenReview) and authorizes for GET /metrics (SubjectAccessReview)",
    )
    add_bool(
        parser,
        "--metrics-require-rbac",
        default=False,
        help="authenticate and authorize metrics clients, over HTTP too",
    )
    parser.add_argument(
        "--metrics-cert-path",
        type=Path,
        default=None,
        help="directory of the metrics server's certificate (default: a self-signed one)",
    )
    parser.add_argument("--metrics-cert-name", default="tls.crt")
    parser.add_argument("--metrics-cert-key", default="tls.key")
    parser.add_argument(
        "--health-probe-bind-address", default=":6789", help="health probe address ('0' disables)"
    )
    parser.add_argument(
        "--api-server-ready-grace",
        type=go_duration,
        default=DEFAULT_API_SERVER_READY_GRACE,
        metavar="DURATION",
        help="/readyz fails once the API server has been unreachable this long "
        "(default: 30s; 0: never)",
    )
    parser.add_argument(
        "--api-server-live-grace",
        type=go_duration,
        default=DEFAULT_API_SERVER_LIVE_GRACE,
        metavar="DURATION",
        help="/healthz fails once the API server has been unreachable this long, "
        "so that a restart may help (default: 5m; 0: never)",
    )
    add_bool(parser, "--leader-elect", default=False, help="run only while holding a Lease")
    parser.add_argument("--leader-election-id", default="ansible-operator")
    parser.add_argument("--leader-election-namespace", default=None)
    parser.add_argument(
        "--leader-elect-lease-duration", type=go_duration, default=15.0, metavar="DURATION"
    )
    parser.add_argument(
        "--leader-elect-renew-deadline", type=go_duration, default=10.0, metavar="DURATION"
    )
    parser.add_argument(
        "--leader-elect-retry-period", type=go_duration, default=2.0, metavar="DURATION"
    )
    parser.add_argument(
        "--graceful-shutdown-timeout", type=go_duration, default=30.0, metavar="DURATION"
    )
    parser.add_argument(
        "--runner-dir",
        type=Path,
        default=None,
        help="where run directories and artifacts are kept "
        "(default: a private temporary directory)",
    )
    parser.add_argument(
        "--runner-mode",
        choices=("warm", "reference"),
        default="warm",
        help="warm: Ansible modules run in forks of a warm interpreter (fast); "
        "reference: a fresh interpreter per task, as Operator SDK does",
    )
    add_acceleration_switch(parser)
    add_webhook_arguments(parser)
    parser.add_argument("--zap-log-level", default="info")
    parser.add_argument("--zap-encoder", choices=("console", "json"), default="console")
    add_bool(parser, "--zap-devel", default=False, help="development logging (debug level)")
    parser.add_argument(
        "--zap-stacktrace-level", default="error", help="accepted for compatibility"
    )
    parser.add_argument("--zap-time-encoding", default="epoch", help="accepted for compatibility")


def impersonation(text: str) -> str:
    from ansible_operator.kube.impersonation import impersonated_user

    try:
        return impersonated_user(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_impersonation_argument(parser: argparse.ArgumentParser) -> None:
    """`--as`, for `run` and `reconcile` alike."""
    parser.add_argument(
        "--as",
        dest="impersonate",
        type=impersonation,
        default=None,
        metavar="USER",
        help="act as this identity, e.g. the deployed operator's "
        "system:serviceaccount:NAMESPACE:NAME, so that a local run meets its RBAC "
        "(your credentials must be allowed to impersonate it)",
    )


def webhook_place(parse_name: str) -> Callable[[str], str]:
    """An argparse type checking a webhook flag with webhooks.service's parser."""

    def check(text: str) -> str:
        from ansible_operator.webhooks import service

        try:
            getattr(service, parse_name)(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return text

    return check


def add_webhook_arguments(parser: argparse.ArgumentParser) -> None:
    """Admission webhooks (watches.yaml `- webhook:` entries; docs/reference.md)."""
    parser.add_argument(
        "--webhook-bind-address",
        type=webhook_place("parse_bind_address"),
        default=":9443",
        help="HTTPS address of the admission webhooks ('0' disables; default: %(default)s)",
    )
    parser.add_argument(
        "--webhook-cert-dir",
        type=Path,
        default=None,
        help="directory with tls.crt, tls.key and optionally ca.crt (cert-manager style; "
        "default: a CA kept in a Secret, and a certificate made at start)",
    )
    add_bool(
        parser,
        "--webhook-manage-configurations",
        default=True,
        help="create and update the Mutating/ValidatingWebhookConfiguration (caBundle included)",
    )
    parser.add_argument(
        "--webhook-configuration-name",
        default=None,
        help="name of the webhook configurations (default: --leader-election-id)",
    )
    parser.add_argument(
        "--webhook-service",
        type=webhook_place("parse_service"),
        default=None,
        metavar="NAMESPACE/NAME[:PORT]",
        help="the Service the API server calls (default in a cluster: "
        "<configuration name>-webhook-service in the operator's namespace, port 443)",
    )
    parser.add_argument(
        "--webhook-url",
        default=None,
        help="a base URL the API server calls instead of a Service "
        "(default outside a cluster: https://127.0.0.1:<port>)",
    )
    parser.add_argument(
        "--webhook-ca-secret",
        type=webhook_place("parse_secret"),
        default=None,
        metavar="NAMESPACE/NAME",
        help="the Secret keeping the webhooks' CA (default with a Service: "
        "<configuration name>-webhook-ca beside it; outside a cluster: none, a new CA each start)",
    )
    parser.add_argument(
        "--webhook-max-concurrent-runs",
        type=int,
        default=None,
        metavar="N",
        help="admission runs at once (default: twice the number of CPUs)",
    )
    client_ca = os.environ.get("ANSIBLE_OPERATOR_WEBHOOK_CLIENT_CA") or None
    parser.add_argument(
        "--webhook-client-ca",
        type=Path,
        default=Path(client_ca) if client_ca else None,
        metavar="FILE",
        help="PEM CA file: the webhook server accepts only clients with a certificate it "
        "issued, as the API server presents when its AdmissionConfiguration gives one "
        "(default: $ANSIBLE_OPERATOR_WEBHOOK_CLIENT_CA; none: any client, rate-limited)",
    )


def add_acceleration_switch(parser: argparse.ArgumentParser) -> None:
    def names(value: str) -> list[str]:
        try:
            return acceleration_names(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    parser.add_argument(
        "--disable-acceleration",
        action="append",
        type=names,
        default=[],
        metavar="NAME[,NAME]",
        help="a warm-runner acceleration not to use (see `ansible-operator doctor`); repeatable",
    )


def switched_off(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(name for names in args.disable_acceleration for name in names)


def options_from(args: argparse.Namespace) -> OperatorOptions:
    namespaces = [n.strip() for n in os.environ.get("WATCH_NAMESPACE", "").split(",") if n.strip()]
    inventory = os.environ.get("ANSIBLE_INVENTORY")
    return OperatorOptions(
        watches_file=args.watches_file,
        kubeconfig=args.kubeconfig,
        impersonate=args.impersonate,
        inject_owner_ref=args.inject_owner_ref,
        ansible_verbosity=args.ansible_verbosity,
        ansible_roles_path=args.ansible_roles_path,
        ansible_collections_path=args.ansible_collections_path,
        ansible_args=unquoted(args.ansible_args),
        ansible_log_events=args.ansible_log_events,
        ansible_debug_logs=os.environ.get("ANSIBLE_DEBUG_LOGS", "").lower() in ("true", "1", "yes"),
        reconcile_period=args.reconcile_period,
        max_concurrent_reconciles=max(1, args.max_concurrent_reconciles),
        max_concurrent_runs=args.max_concurrent_runs,
        run_timeout=args.run_timeout or None,
        max_run_output=args.max_run_output or None,
        run_memory_limit=args.run_memory_limit or None,
        reconcile_run_nice=args.reconcile_run_nice,
        proxy_port=args.proxy_port,
        metrics_bind_address=args.metrics_bind_address,
        metrics_secure=args.metrics_secure,
        metrics_require_rbac=args.metrics_require_rbac,
        metrics_cert_path=args.metrics_cert_path,
        metrics_cert_name=args.metrics_cert_name,
        metrics_cert_key=args.metrics_cert_key,
        health_probe_bind_address=args.health_probe_bind_address,
        api_server_ready_grace=args.api_server_ready_grace,
        api_server_live_grace=args.api_server_live_grace,
        leader_elect=args.leader_elect,
        leader_election_id=args.leader_election_id,
        leader_election_namespace=args.leader_election_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        watch_namespaces=namespaces,
        runner_dir=args.runner_dir,
        runner_mode=args.runner_mode,
        disabled_accelerations=switched_off(args),
        webhook_bind_address=args.webhook_bind_address,
        webhook_cert_dir=args.webhook_cert_dir,
        webhook_manage_configurations=args.webhook_manage_configurations,
        webhook_configuration_name=args.webhook_configuration_name,
        webhook_service=args.webhook_service,
        webhook_url=args.webhook_url,
        webhook_ca_secret=args.webhook_ca_secret,
        webhook_max_concurrent_runs=args.webhook_max_concurrent_runs,
        webhook_client_ca=args.webhook_client_ca,
        inventory=Path(inventory) if inventory else None,
        skip_facts=facts_skipped(os.environ),
    )


def run(args: argparse.Namespace) -> int:
    from ansible_operator.cluster import connect_config
    from ansible_operator.controller.manager import Manager
    from ansible_operator.http_limits import raise_open_file_limit
    from ansible_operator.kube.config import KubeConfigError
    from ansible_operator.watches import WatchesError, load_watches_file, templated_cluster_data

    level = logs.parse_level("debug" if args.zap_devel else args.zap_log_level)
    logs.configure(level, args.zap_encoder)
    log.info("ansible-operator %s %s", __version__, one_line(installed_versions()))
    before, after = raise_open_file_limit()
    if after != before:
        log.info("open file limit raised soft=%d was=%d", after, before)
    options = options_from(args)
    env = dict(os.environ)
    if options.ansible_roles_path:
        env["ANSIBLE_ROLES_PATH"] = options.ansible_roles_path
    if options.ansible_collections_path:
        env["ANSIBLE_COLLECTIONS_PATH"] = options.ansible_collections_path
    try:
        declared = load_watches_file(options.watches_file, env=env, cwd=Path.cwd())
    except WatchesError as error:
        print(f"ansible-operator: invalid watches file:\n{error}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"ansible-operator: watches file not found: {options.watches_file}", file=sys.stderr)
        return 2
    for warning in templated_cluster_data(declared.watches):
        log.warning("%s", warning)
    manager = Manager(declared.watches, options, connect=connect_config, webhooks=declared.webhooks)
    try:
        return asyncio.run(manager.run())
    except KubeConfigError as error:
        print(f"ansible-operator: {error}", file=sys.stderr)
        return 2
