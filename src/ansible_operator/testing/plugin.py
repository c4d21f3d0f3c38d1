"""pytest plugin: a real Kubernetes API server for tests.

Registered through the `pytest11` entry point, so any project with
ansible-operator installed gets these fixtures:

- `kube_cluster` (session): the cluster in KUBECONFIG, envtest binaries in
  KUBEBUILDER_ASSETS, or our local control plane (built on first use);
- `kube_api` (session): a `kubernetes.client.ApiClient` for it;
- `kube_namespace`: a fresh namespace per test, deleted afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from ansible_operator.cluster import Cluster, provide


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with provide(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kube_api(kube_cluster: Cluster) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(str(kube_cluster.kubeconfig)) as api:
        yield api


@pytest.fixture
def kube_namespace(kube_api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException as error:
        if error.status != 404:
            raise
