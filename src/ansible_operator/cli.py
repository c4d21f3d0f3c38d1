"""The `ansible-operator` command line."""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# A subcommand's module is imported when that subcommand runs (or shows its
# help), not for every command: `run` is ready sooner without scaffold, check,
# the local cluster's certificates and the `kubernetes` package it never uses.
Define = Callable[[argparse.ArgumentParser], None]


class _Deferred(argparse.ArgumentParser):
    """A subcommand parser whose arguments are defined on first use: when it
    parses or prints its usage or help. The top-level help lists it by name
    and help text alone."""

    def __init__(self, *args: Any, define: Define | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._define = define

    def _defined(self) -> None:
        define, self._define = self._define, None
        if define is not None:
            define(self)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._defined()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._defined()
        return super().format_usage()

    def format_help(self) -> str:
        self._defined()
        return super().format_help()


def _arguments(module: str, add: str, func: str) -> Define:
    """Defines a subcommand with `module`'s `add(parser)`, run by its `func`."""

    def define(parser: argparse.ArgumentParser) -> None:
        loaded = importlib.import_module(module)
        getattr(loaded, add)(parser)
        parser.set_defaults(func=getattr(loaded, func))

    return define


# The errors a command reports in one line rather than a traceback, by module:
# one never imported raised none of them.
REPORTED_ERRORS = (
    ("ansible_operator.cluster.build", "BuildError"),
    ("ansible_operator.cluster.local", "ControlPlaneError"),
    ("ansible_operator.cluster.host", "HostError"),
    ("ansible_operator.cluster.images", "ImageError"),
)


def _reported(error: Exception) -> bool:
    for module, name in REPORTED_ERRORS:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(error, getattr(loaded, name)):
            return True
    return False


def _say(message: str) -> None:
    print(f"ansible-operator: {message}", file=sys.stderr)


def _feature_gates(text: str) -> dict[str, bool]:
    from ansible_operator.cluster.local import parse_feature_gates

    # argparse shows an ArgumentTypeError's own message, which names the bad pair.
    try:
        return parse_feature_gates(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


class _MergeFeatureGates(argparse.Action):
    """Every --feature-gates given, merged: a later one wins, as in Kubernetes."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(values, dict)
        # A new dict each time: the default one is shared by every parse.
        setattr(namespace, self.dest, {**getattr(namespace, self.dest), **values})


def _describe_gates(gates: dict[str, bool]) -> str:
    from ansible_operator.cluster.local import format_feature_gates

    return format_feature_gates(gates) or "none"


def cluster_up(args: argparse.Namespace) -> int:
    from ansible_operator.cluster import LocalControlPlane, local_binaries
    from ansible_operator.cluster.local import format_feature_gates
    from ansible_operator.cluster.node import NODE_NAME, LocalNode, node_unavailable_reason

    gates = args.feature_gates
    plane = LocalControlPlane(args.state_dir, None)
    if plane.state and any(plane.running().values()):
        if plane.feature_gates != gates:
            # Restarting would move the API server to new ports under whoever
            # uses it now; the user decides when.
            _say(
                f"the control plane in {args.state_dir} runs with feature gates "
                f"{_describe_gates(plane.feature_gates)}; this 'up' asks for "
                f"{_describe_gates(gates)}: run 'ansible-operator cluster down', then "
                "'cluster up' again with the gates wanted (its data is kept)"
            )
            return 1
        if plane.ready():
            print(f"already running; kubeconfig: {plane.kubeconfig}")
            print(f"export KUBECONFIG={plane.kubeconfig}")
            return 0
        _say(
            f"a partly running control plane is recorded in {args.state_dir}; "
            "run 'ansible-operator cluster down' first"
        )
        return 1
    node = args.node
    if node:
        reason = node_unavailable_reason()
        if reason:
            _say(f"no node: {reason}; starting the API-only control plane (Pods will not run)")
            node = False
    plane = LocalControlPlane(args.state_dir, local_binaries(_say), node=node, feature_gates=gates)
    started = time.monotonic()
    kubeconfig = plane.start(detached=True, progress=_say)
    if node:
        try:
            LocalNode(plane).start(detached=True, progress=_say)
        except BaseException:
            plane.stop()
            raise
    _say(
        f"ready in {time.monotonic() - started:.1f}s at {plane.state.server if plane.state else ''}"
        f"{' with node ' + NODE_NAME if node else ''}"
        f"{' (feature gates ' + format_feature_gates(gates) + ')' if gates else ''}"
        f"; logs in {plane.log_dir}"
    )
    print(f"kubeconfig: {kubeconfig}")
    print(f"export KUBECONFIG={kubeconfig}")
    return 0


def cluster_status(args: argparse.Namespace) -> int:
    from ansible_operator.cluster import LocalControlPlane
    from ansible_operator.cluster.node import NODE_NAME, LocalNode, NodeRecord

    plane = LocalControlPlane(args.state_dir, None)
    if plane.state is None:
        print(f"no local control plane recorded in {args.state_dir}")
        return 1
    running = plane.running()
    ready = plane.ready()
    report = {
        "server": plane.state.server,
        "kubeconfig": str(plane.kubeconfig),
        "ready": ready,
        "feature_gates": plane.feature_gates,
        "processes": {
            name: {"pid": plane.state.pids.get(name), "running": alive}
            for name, alive in running.items()
        },
    }
    if plane.node:
        node = LocalNode(plane)
        record = NodeRecord.load()
        node_running = node.running() or {"containerd": False, "kubelet": False}
        running.update(node_running)
        report["node"] = {
            "name": NODE_NAME,
            "ready": ready and all(node_running.values()) and node.ready(),
            "processes": {
                name: {"pid": record.pids.get(name) if record else None, "running": alive}
                for name, alive in node_running.items()
            },
        }
    print(json.dumps(report, indent=2))
    return 0 if ready and all(running.values()) else 1


def cluster_down(args: argparse.Namespace) -> int:
    from ansible_operator.cluster import LocalControlPlane
    from ansible_operator.cluster.node import LocalNode

    plane = LocalControlPlane(args.state_dir, None)
    if plane.state is None:
        print(f"no local control plane recorded in {args.state_dir}")
        return 0
    try:
        if plane.node:
            LocalNode(plane).stop()
    finally:
        plane.stop()
    left = [name for name, alive in plane.running().items() if alive]
    if left:
        _say(f"could not stop: {', '.join(left)}")
        return 1
    if args.purge:
        shutil.rmtree(args.state_dir)
        print(f"stopped; removed {args.state_dir}")
    else:
        print(f"stopped (state kept in {args.state_dir}; --purge removes it)")
    return 0


def cluster_images(args: argparse.Namespace) -> int:
    from ansible_operator.cluster import LocalControlPlane
    from ansible_operator.cluster.images import RECIPES, ImageBuilder
    from ansible_operator.cluster.node import NODE_NAME, LocalNode

    unknown = sorted(set(args.names) - set(RECIPES))
    if unknown:
        _say(f"no image recipe named {', '.join(unknown)}; known: {', '.join(RECIPES)}")
        return 2
    builder = ImageBuilder(progress=_say)
    built = []
    for name in args.names or ["samples", "memcached"]:
        started = time.monotonic()
        image = builder.recipe(name)
        _say(f"{image.name} ready in {time.monotonic() - started:.1f}s ({image.archive})")
        built.append(image)
    plane = LocalControlPlane(args.state_dir, None)
    node = LocalNode(plane) if plane.state and plane.node else None
    if node is None or not any(node.running().values()):
        print("built; no node runs here to load them into ('cluster up --node' starts one)")
        return 0
    node.load(built, progress=_say)
    print(f"loaded into node {NODE_NAME}: {', '.join(image.name for image in built)}")
    return 0


def demo(args: argparse.Namespace) -> int:
    from ansible_operator.commands.demo import run_demo

    return run_demo(args)


class _PrintVersions(argparse.Action):
    """`--version`: argparse's own would re-wrap the lines into one paragraph."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the versions in use and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from ansible_operator.commands.doctor import version_text

        print(version_text())
        parser.exit()


def _define_cluster(cluster: argparse.ArgumentParser) -> None:
    from ansible_operator.cluster import default_state_dir
    from ansible_operator.cluster.images import RECIPES

    cluster.add_argument(
        "--state-dir",
        type=Path,
        default=default_state_dir(),
        help="where its certificates, data, logs and kubeconfig live (default: %(default)s)",
    )
    # `cluster ACTION --state-dir DIR` too (what messages suggest): the action's own
    # flag, defaulting to none so the group's (or its default) stands.
    state_dir = argparse.ArgumentParser(add_help=False)
    state_dir.add_argument(
        "--state-dir", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up",
        parents=[state_dir],
        help="start etcd, kube-apiserver and kube-controller-manager "
        "detached; print the kubeconfig",
    )
    up.add_argument(
        "--node",
        action="store_true",
        help="also run a real node (kubelet, containerd, kube-scheduler) so Pods run; "
        "needs root, installs containerd, runc and CNI plugins from Debian's packages",
    )
    up.add_argument(
        "--feature-gates",
        type=_feature_gates,
        action=_MergeFeatureGates,
        default={},
        metavar="NAME=BOOL,...",
        help="Kubernetes feature gates for kube-apiserver, kube-controller-manager and "
        "kube-scheduler, e.g. ShardedListAndWatch=true; recorded with the cluster: "
        "'up' refuses a running one started with other gates (none given means none) "
        "and says to run 'cluster down' first",
    )
    up.set_defaults(func=cluster_up)
    actions.add_parser(
        "status", parents=[state_dir], help="show whether it runs and is ready"
    ).set_defaults(func=cluster_status)
    images = actions.add_parser(
        "images",
        parents=[state_dir],
        help="build this repository's images without a registry (buildah, Debian's "
        "packages) and load them into the node",
    )
    images.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"which images: {', '.join(RECIPES)} (default: samples and memcached)",
    )
    images.set_defaults(func=cluster_images)
    actions.add_parser(
        "load",
        parents=[state_dir],
        define=_arguments("ansible_operator.cluster.load", "add_load_arguments", "cluster_load"),
        help="load images into the node's containerd: from ansible-operator's image store, "
        "an OCI or docker archive, or built from a Dockerfile (--build DIR)",
    )
    down = actions.add_parser("down", parents=[state_dir], help="stop every process of it")
    down.add_argument("--purge", action="store_true", help="also delete its state directory")
    down.set_defaults(func=cluster_down)


def _define_demo(demo_parser: argparse.ArgumentParser) -> None:
    demo_parser.add_argument(
        "--keep", action="store_true", help="leave the local control plane running afterwards"
    )
    demo_parser.set_defaults(func=demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ansible-operator",
        description="Run Kubernetes operators whose reconcile logic is Ansible roles "
        "and playbooks.",
    )
    parser.add_argument("--version", action=_PrintVersions)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Deferred)

    commands.add_parser(
        "cluster", define=_define_cluster, help="a local Kubernetes control plane for development"
    )
    commands.add_parser(
        "run",
        define=_arguments("ansible_operator.commands.run", "add_run_arguments", "run"),
        help="run the operator described by a watches.yaml (the reference's flags)",
    )
    commands.add_parser(
        "reconcile",
        define=_arguments(
            "ansible_operator.commands.reconcile", "add_reconcile_arguments", "reconcile"
        ),
        help="run one object's reconcile once, locally, showing Ansible's output",
    )
    commands.add_parser(
        "init",
        define=_arguments(
            "ansible_operator.scaffold.command", "add_init_arguments", "init_command"
        ),
        help="write a new operator project (watches.yaml, roles/, config/, tests/)",
    )
    commands.add_parser(
        "create",
        define=_arguments(
            "ansible_operator.scaffold.command", "add_create_arguments", "create_api_command"
        ),
        help="add to the project in --dir",
    )
    commands.add_parser(
        "bundle",
        define=_arguments(
            "ansible_operator.scaffold.bundle", "add_bundle_arguments", "bundle_command"
        ),
        help="write the project's OLM registry+v1 bundle (bundle/, bundle.Dockerfile) "
        "and check it as OLM reads it",
    )
    commands.add_parser(
        "check",
        define=_arguments("ansible_operator.commands.check", "add_check_arguments", "check"),
        help="load watches.yaml, roles and playbooks without a cluster and report "
        "what will fail (ansible-core 2.19 templating changes included)",
    )
    commands.add_parser(
        "migrate",
        define=_arguments(
            "ansible_operator.commands.migrate", "add_migrate_arguments", "migrate_command"
        ),
        help="rewrite every stored object of a kind in its CRD's storage version, then drop "
        "the other versions from status.storedVersions (resumable)",
    )
    commands.add_parser(
        "doctor",
        define=_arguments("ansible_operator.commands.doctor", "add_doctor_arguments", "doctor"),
        help="show the Python, ansible-core, ansible-runner and kubernetes.core in use "
        "and which warm-runner accelerations apply to them (and why not)",
    )
    commands.add_parser(
        "demo",
        define=_define_demo,
        help="run the sample operators on the local control plane (or KUBECONFIG) "
        "and show samples reach their final state",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if not _reported(error):
            raise
        _say(str(error))
        return 1


if __name__ == "__main__":
    sys.exit(main())
