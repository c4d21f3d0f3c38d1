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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ansible_operator.cluster.build import BuildError, ensure_binary
from ansible_operator.cluster.local import Binaries, ControlPlaneError, LocalControlPlane
from ansible_operator.kube.config import KubeConfig, KubeConfigError, load_config

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
) -> Iterator[Cluster]:
    """Yield a ready cluster; stop anything started here when the block ends."""
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
        plane = LocalControlPlane(state_dir, local_binaries(progress))
        stack.callback(plane.stop)
        path = plane.start(progress=progress)
        yield Cluster(path, source, plane)


def connect_config(kubeconfig: str | Path | None = None) -> KubeConfig:
    """The cluster to talk to: --kubeconfig, KUBECONFIG, in-cluster, ~/.kube/config,
    and last the local control plane if `ansible-operator cluster up` started one."""
    try:
        return load_config(kubeconfig)
    except KubeConfigError:
        if kubeconfig is not None:
            raise
        plane = LocalControlPlane(default_state_dir(), None)
        if not (plane.state and plane.ready()):
            raise
        print(
            f"ansible-operator: using the local control plane ({plane.kubeconfig})", file=sys.stderr
        )
        return load_config(plane.kubeconfig)
