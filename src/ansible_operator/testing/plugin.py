"""pytest plugin: a real Kubernetes API server for tests.

Registered through the `pytest11` entry point, so any project with
ansible-operator installed gets these fixtures:

- `kube_cluster` (session): the cluster in KUBECONFIG, envtest binaries in
  KUBEBUILDER_ASSETS, or our local control plane (built on first use);
- `kube_api` (session): a `kubernetes.client.ApiClient` for it;
- `kube_namespace`: a fresh namespace per test, deleted afterwards (finalizers
  of custom objects left in it are dropped, so it never stays Terminating).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

# The kubernetes library and the cluster package take about a second to import;
# every pytest run loads this plugin, so only the fixtures that need them do.
if TYPE_CHECKING:
    from kubernetes import client

    from ansible_operator.cluster import Cluster


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from ansible_operator.cluster import provide

    with provide(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kube_api(kube_cluster: Cluster) -> Iterator[client.ApiClient]:
    from kubernetes import config

    with config.new_client_from_config(str(kube_cluster.kubeconfig)) as api:
        yield api


@pytest.fixture
def kube_namespace(kube_api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    from kubernetes import client

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
    _release_custom_objects(kube_api, name)


def _release_custom_objects(api: client.ApiClient, namespace: str) -> None:
    """Custom objects left with finalizers once the test's operator is gone
    would keep the namespace terminating forever (and the control plane busy
    retrying): drop their finalizers, the operator will not come back."""
    from kubernetes import client

    custom = client.CustomObjectsApi(api)
    for crd in client.ApiextensionsV1Api(api).list_custom_resource_definition().items:
        if crd.spec.scope != "Namespaced":
            continue
        for version in (v.name for v in crd.spec.versions if v.served):
            try:
                items = custom.list_namespaced_custom_object(
                    crd.spec.group, version, namespace, crd.spec.names.plural
                )["items"]
            except client.ApiException:
                continue
            for item in items:
                if item["metadata"].get("finalizers"):
                    with contextlib.suppress(client.ApiException):
                        custom.patch_namespaced_custom_object(
                            crd.spec.group,
                            version,
                            namespace,
                            crd.spec.names.plural,
                            item["metadata"]["name"],
                            {"metadata": {"finalizers": None}},
                        )
            if items:
                # Gone now, not when the namespace controller comes to them: the
                # next test's operator would find them first, put its finalizer
                # back, and fail it for good in a namespace being deleted.
                with contextlib.suppress(client.ApiException):
                    custom.delete_collection_namespaced_custom_object(
                        crd.spec.group, version, namespace, crd.spec.names.plural
                    )
            break  # one served version lists them all
