"""`ansible-operator run`: the reference's flags, names and defaults.

Go-style flags are accepted as the reference's users write them:
`--leader-elect`, `--leader-elect=true`, `--inject-owner-ref=false`,
`--reconcile-period=1m30s`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from ansible_operator import logs
from ansible_operator.controller.options import DEFAULT_RECONCILE_PERIOD, OperatorOptions
from ansible_operator.durations import DurationError, parse_duration

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
        default=None,
        metavar="DURATION",
        help="kill a run that takes longer (default: none; per watch: runTimeout)",
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
        default=":8443",
        help="metrics server address ('0' disables)",
    )
    parser.add_argument(
        "--health-probe-bind-address", default=":6789", help="health probe address ('0' disables)"
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
    parser.add_argument("--zap-log-level", default="info")
    parser.add_argument("--zap-encoder", choices=("console", "json"), default="console")
    add_bool(parser, "--zap-devel", default=False, help="development logging (debug level)")
    parser.add_argument(
        "--zap-stacktrace-level", default="error", help="accepted for compatibility"
    )
    parser.add_argument("--zap-time-encoding", default="epoch", help="accepted for compatibility")


def options_from(args: argparse.Namespace) -> OperatorOptions:
    namespaces = [n.strip() for n in os.environ.get("WATCH_NAMESPACE", "").split(",") if n.strip()]
    inventory = os.environ.get("ANSIBLE_INVENTORY")
    return OperatorOptions(
        watches_file=args.watches_file,
        kubeconfig=args.kubeconfig,
        inject_owner_ref=args.inject_owner_ref,
        ansible_verbosity=args.ansible_verbosity,
        ansible_roles_path=args.ansible_roles_path,
        ansible_collections_path=args.ansible_collections_path,
        ansible_args=args.ansible_args,
        ansible_log_events=args.ansible_log_events,
        ansible_debug_logs=os.environ.get("ANSIBLE_DEBUG_LOGS", "").lower() in ("true", "1", "yes"),
        reconcile_period=args.reconcile_period,
        max_concurrent_reconciles=max(1, args.max_concurrent_reconciles),
        max_concurrent_runs=args.max_concurrent_runs,
        run_timeout=args.run_timeout,
        proxy_port=args.proxy_port,
        metrics_bind_address=args.metrics_bind_address,
        health_probe_bind_address=args.health_probe_bind_address,
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
        inventory=Path(inventory) if inventory else None,
        # As the reference: facts are gathered unless ANSIBLE_GATHERING=explicit.
        skip_facts=os.environ.get("ANSIBLE_GATHERING", "").lower() == "explicit",
    )


def run(args: argparse.Namespace) -> int:
    from ansible_operator.controller.manager import Manager
    from ansible_operator.kube.config import KubeConfigError
    from ansible_operator.watches import WatchesError, load_watches

    level = logs.parse_level("debug" if args.zap_devel else args.zap_log_level)
    logs.configure(level, args.zap_encoder)
    options = options_from(args)
    env = dict(os.environ)
    if options.ansible_roles_path:
        env["ANSIBLE_ROLES_PATH"] = options.ansible_roles_path
    if options.ansible_collections_path:
        env["ANSIBLE_COLLECTIONS_PATH"] = options.ansible_collections_path
    try:
        watches = load_watches(options.watches_file, env=env, cwd=Path.cwd())
    except WatchesError as error:
        print(f"ansible-operator: invalid watches file:\n{error}", file=sys.stderr)
        return 2
    except FileNotFoundError:
        print(f"ansible-operator: watches file not found: {options.watches_file}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(Manager(watches, options).run())
    except KubeConfigError as error:
        print(f"ansible-operator: {error}", file=sys.stderr)
        return 2
