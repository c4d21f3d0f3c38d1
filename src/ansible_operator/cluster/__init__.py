"""Where a Kubernetes API server comes from: the cluster in KUBECONFIG, envtest
binaries in KUBEBUILDER_ASSETS, or our own local control plane built from Go.

`provide()` picks one in that order and yields a `Cluster`; whatever it started,
it stops on exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ansible_operator.kube.config import KubeConfig, KubeConfigError, load_config

# The control plane's code (its certificates: cryptography) and the node's (the
# kubernetes client, a third of a second) load when a cluster is started or
# looked for; `connect_config`, which every command calls, needs neither when
# a kubeconfig is there.
if TYPE_CHECKING:
    from ansible_operator.cluster.build import BuildError
    from ansible_operator.cluster.local import Binaries, ControlPlaneError, LocalControlPlane
    from ansible_operator.cluster.node import LocalNode

_LATER = {
    "BuildError": "ansible_operator.cluster.build",
    "ControlPlaneError": "ansible_operator.cluster.local",
    "LocalControlPlane": "ansible_operator.cluster.local",
}


def __getattr__(name: str) -> Any:
    if name in _LATER:
        import importlib

        return getattr(importlib.import_module(_LATER[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BuildError",
    "Cluster",
    "ControlPlaneError",
    "LocalControlPlane",
    "connect_config",
    "default_state_dir",
    "local_binaries",
    "provide",
]


@dataclass
class Cluster:
    kubeconfig: Path
    source: str  # "kubeconfig" | "envtest" | "local"
    control_plane: LocalControlPlane | None = None
    node: LocalNode | None = None  # our local node, when asked for and possible
    no_node_reason: str | None = None  # why a node was asked for and none runs

    @property
    def has_garbage_collector(self) -> bool:
        """A real cluster has one; envtest has none; ours runs kube-controller-manager."""
        if self.control_plane is None:
            return True
        return self.control_plane.has_controller_manager


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ansible-operator" / "cluster"


def local_binaries(progress: Callable[[str], None] | None = None) -> Binaries:
    """envtest binaries when KUBEBUILDER_ASSETS names them, else our built binary."""
    from ansible_operator.cluster.build import ensure_binary
    from ansible_operator.cluster.local import Binaries

    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        return Binaries.envtest(Path(assets))
    return Binaries.multicall(ensure_binary(progress))


@contextlib.contextmanager
def provide(
    state_dir: Path | None = None,
    *,
    use_kubeconfig: bool = True,
    progress: Callable[[str], None] | None = None,
    node: bool = False,
    feature_gates: Mapping[str, bool] | None = None,
) -> Iterator[Cluster]:
    """Yield a ready cluster; stop anything started here when the block ends.

    `node`: our local control plane gets a node too, where one can run (root,
    no other node here); elsewhere `Cluster.no_node_reason` says why not.
    `feature_gates` apply only to a control plane started here: the cluster in
    KUBECONFIG has the gates it has."""
    from ansible_operator.cluster.local import LocalControlPlane

    kubeconfig = os.environ.get("KUBECONFIG")
    if use_kubeconfig and kubeconfig:
        yield Cluster(Path(kubeconfig.split(os.pathsep)[0]), "kubeconfig")
        return
    source = "envtest" if os.environ.get("KUBEBUILDER_ASSETS") else "local"
    with contextlib.ExitStack() as stack:
        if state_dir is None:
            state_dir = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="ansible-operator-cluster-"))
            )
        reason = None
        if node:
            from ansible_operator.cluster.node import node_unavailable_reason

            reason = (
                "envtest binaries have no kubelet" if source == "envtest" else None
            ) or node_unavailable_reason()
        with_node = node and reason is None
        plane = LocalControlPlane(
            state_dir, local_binaries(progress), node=with_node, feature_gates=feature_gates
        )
        stack.callback(plane.stop)
        path = plane.start(progress=progress)
        local_node = None
        if with_node:
            from ansible_operator.cluster.node import LocalNode

            local_node = LocalNode(plane)
            local_node.start(progress=progress)
            stack.callback(local_node.stop)
        yield Cluster(path, source, plane, local_node, reason)


def connect_config(kubeconfig: str | Path | None = None) -> KubeConfig:
    """The cluster to talk to: --kubeconfig, KUBECONFIG, in-cluster, ~/.kube/config,
    and last the local control plane if `ansible-operator cluster up` started one."""
    try:
        return load_config(kubeconfig)
    except KubeConfigError:
        if kubeconfig is not None:
            raise
        from ansible_operator.cluster.local import LocalControlPlane

        plane = LocalControlPlane(default_state_dir(), None)
        if not (plane.state and plane.ready()):
            raise
        print(
            f"ansible-operator: using the local control plane ({plane.kubeconfig})", file=sys.stderr
        )
        return load_config(plane.kubeconfig)
