"""The `ansible-operator` command line."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from ansible_operator.cluster import (
    BuildError,
    ControlPlaneError,
    LocalControlPlane,
    default_state_dir,
    local_binaries,
)
from ansible_operator.cluster.host import HostError
from ansible_operator.cluster.images import RECIPES, ImageError
from ansible_operator.cluster.local import format_feature_gates, parse_feature_gates
from ansible_operator.cluster.node import NODE_NAME, LocalNode, NodeRecord, node_unavailable_reason


def _say(message: str) -> None:
    print(f"ansible-operator: {message}", file=sys.stderr)


def _feature_gates(text: str) -> dict[str, bool]:
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
    return format_feature_gates(gates) or "none"


def cluster_up(args: argparse.Namespace) -> int:
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


# What `cluster images NAME` builds (ImageBuilder.recipe).
IMAGE_RECIPES = RECIPES


def cluster_images(args: argparse.Namespace) -> int:
    from ansible_operator.cluster.images import ImageBuilder

    unknown = sorted(set(args.names) - set(IMAGE_RECIPES))
    if unknown:
        _say(f"no image recipe named {', '.join(unknown)}; known: {', '.join(IMAGE_RECIPES)}")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ansible-operator",
        description="Run Kubernetes operators whose reconcile logic is Ansible roles "
        "and playbooks.",
    )
    from ansible_operator.commands.doctor import PrintVersions, add_doctor_arguments, doctor

    parser.add_argument("--version", action=PrintVersions)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    cluster = commands.add_parser(
        "cluster", help="a local Kubernetes control plane for development"
    )
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
        help=f"which images: {', '.join(IMAGE_RECIPES)} (default: samples and memcached)",
    )
    images.set_defaults(func=cluster_images)
    from ansible_operator.cluster.load import add_load_arguments, cluster_load

    load = actions.add_parser(
        "load",
        parents=[state_dir],
        help="load images into the node's containerd: from ansible-operator's image store, "
        "an OCI or docker archive, or built from a Dockerfile (--build DIR)",
    )
    add_load_arguments(load)
    load.set_defaults(func=cluster_load)
    down = actions.add_parser("down", parents=[state_dir], help="stop every process of it")
    down.add_argument("--purge", action="store_true", help="also delete its state directory")
    down.set_defaults(func=cluster_down)

    from ansible_operator.commands.run import add_run_arguments, run

    run_parser = commands.add_parser(
        "run", help="run the operator described by a watches.yaml (the reference's flags)"
    )
    add_run_arguments(run_parser)
    run_parser.set_defaults(func=run)

    from ansible_operator.commands.reconcile import add_reconcile_arguments, reconcile

    reconcile_parser = commands.add_parser(
        "reconcile", help="run one object's reconcile once, locally, showing Ansible's output"
    )
    add_reconcile_arguments(reconcile_parser)
    reconcile_parser.set_defaults(func=reconcile)

    from ansible_operator.scaffold.command import add_scaffold_commands

    add_scaffold_commands(commands)

    from ansible_operator.scaffold.bundle import add_bundle_arguments, bundle_command

    bundle_parser = commands.add_parser(
        "bundle",
        help="write the project's OLM registry+v1 bundle (bundle/, bundle.Dockerfile) "
        "and check it as OLM reads it",
    )
    add_bundle_arguments(bundle_parser)
    bundle_parser.set_defaults(func=bundle_command)

    from ansible_operator.commands.check import add_check_arguments, check

    check_parser = commands.add_parser(
        "check",
        help="load watches.yaml, roles and playbooks without a cluster and report "
        "what will fail (ansible-core 2.19 templating changes included)",
    )
    add_check_arguments(check_parser)
    check_parser.set_defaults(func=check)

    from ansible_operator.commands.migrate import add_migrate_arguments, migrate_command

    migrate_parser = commands.add_parser(
        "migrate",
        help="rewrite every stored object of a kind in its CRD's storage version, then drop "
        "the other versions from status.storedVersions (resumable)",
    )
    add_migrate_arguments(migrate_parser)
    migrate_parser.set_defaults(func=migrate_command)

    doctor_parser = commands.add_parser(
        "doctor",
        help="show the Python, ansible-core, ansible-runner and kubernetes.core in use "
        "and which warm-runner accelerations apply to them (and why not)",
    )
    add_doctor_arguments(doctor_parser)
    doctor_parser.set_defaults(func=doctor)

    demo_parser = commands.add_parser(
        "demo",
        help="run the sample operators on the local control plane (or KUBECONFIG) "
        "and show samples reach their final state",
    )
    demo_parser.add_argument(
        "--keep", action="store_true", help="leave the local control plane running afterwards"
    )
    demo_parser.set_defaults(func=demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except (BuildError, ControlPlaneError, HostError, ImageError) as error:
        _say(str(error))
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
