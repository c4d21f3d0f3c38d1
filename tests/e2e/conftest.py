"""End-to-end tests of the sample operators: the repo's own watches.yaml,
roles and CRDs, run by `ansible-operator run` against a real API server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "config" / "crd" / "bases"

StartSamples = Callable[..., OperatorProcess]


@pytest.fixture(scope="module")
def sample_operator(
    kube_cluster: Cluster, kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StartSamples]:
    """`sample_operator(*crd_files, args=[...], env={...})` installs those CRDs
    (file names under config/crd/bases) and starts the operator over the
    repo's watches.yaml, once per test module; it is stopped at module end."""
    started: list[OperatorProcess] = []

    def start(
        *crd_files: str, args: list[str] | None = None, env: dict[str, str] | None = None
    ) -> OperatorProcess:
        if started:
            return started[0]
        for name in crd_files:
            apply_manifests(kube_api, CRDS / name)
        process = OperatorProcess(
            ROOT / "watches.yaml",
            kube_cluster.kubeconfig,
            log_path=tmp_path_factory.mktemp("operator") / "operator.log",
            # watches.yaml has webhooks: served on a free loopback port, not :9443, so that
            # test sessions sharing a machine never fight over one port (a later flag wins).
            args=["--webhook-bind-address=127.0.0.1:0", *(args or [])],
            env=env,
            cwd=ROOT,
        )
        started.append(process.start())
        return process

    yield start
    for process in started:
        process.stop()
