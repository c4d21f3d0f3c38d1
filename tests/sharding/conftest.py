"""A second local control plane with ShardedListAndWatch on (alpha in
Kubernetes 1.36, off by default), beside the shared `kube_cluster`, whose gates
stay as a user's cluster has them.

- `sharded_cluster` (session): that control plane, a `Cluster` like
  `kube_cluster`'s, with a state directory and ports of its own;
- `sharded_api` (session): a `kubernetes.client.ApiClient` for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kubernetes import client

    from ansible_operator.cluster import Cluster

SHARDING_GATES = {"ShardedListAndWatch": True}


def _not_local_reason() -> str | None:
    """Why this run cannot start a gated control plane of its own, the choices
    `provide` makes in the same order."""
    if os.environ.get("KUBECONFIG"):
        return (
            "needs the local control plane (Kubernetes v1.36.3 from controlplane/) started "
            "with ShardedListAndWatch=true; this run uses the cluster in KUBECONFIG"
        )
    if os.environ.get("KUBEBUILDER_ASSETS"):
        return (
            "needs the local control plane (Kubernetes v1.36.3 from controlplane/); envtest "
            "binaries in KUBEBUILDER_ASSETS may predate the ShardedListAndWatch gate"
        )
    return None


@pytest.fixture(scope="session")
def sharded_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = _not_local_reason()
    if reason:
        pytest.skip(reason)
    from ansible_operator.cluster import provide

    # Its own state directory; ports are chosen free at start, so it runs
    # beside the shared cluster.
    with provide(
        tmp_path_factory.mktemp("sharded-cluster"),
        use_kubeconfig=False,
        feature_gates=SHARDING_GATES,
    ) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def sharded_api(sharded_cluster: Cluster) -> Iterator[client.ApiClient]:
    from kubernetes import config

    with config.new_client_from_config(str(sharded_cluster.kubeconfig)) as api:
        yield api
