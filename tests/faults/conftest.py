"""The fault suite: the operator under faults and bad input, on a real API
server with real Ansible, driving the operator in tests/faults/operator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faultops import OPERATOR, StartOperator
from kubernetes import client

from ansible_operator.cluster import Cluster, LocalControlPlane
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess


@pytest.fixture(scope="session")
def fault_crds(kube_api: client.ApiClient) -> None:
    apply_manifests(kube_api, OPERATOR / "crds.yaml")


@pytest.fixture
def start_operator(
    kube_cluster: Cluster, fault_crds: None, kube_namespace: str, tmp_path: Path
) -> Iterator[StartOperator]:
    """`start_operator(args=[...], env={...}, watches=...)` runs the fault
    operator over the test's namespace; every one started is stopped after."""
    started: list[OperatorProcess] = []

    def start(
        *,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        watches: Path | None = None,
        kubeconfig: Path | None = None,
        wait_ready: bool = True,
    ) -> OperatorProcess:
        process = OperatorProcess(
            watches or OPERATOR / "watches.yaml",
            kubeconfig or kube_cluster.kubeconfig,
            log_path=tmp_path / f"operator-{len(started)}.log",
            args=args,
            env={"WATCH_NAMESPACE": kube_namespace, **(env or {})},
        )
        started.append(process)
        return process.start(wait_ready=wait_ready)

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def control_plane(kube_cluster: Cluster) -> LocalControlPlane:
    if kube_cluster.control_plane is None:
        pytest.skip("stops and restarts kube-apiserver: needs our local control plane")
    return kube_cluster.control_plane
