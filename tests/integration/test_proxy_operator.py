"""The proxy as roles see it: owner references, dependent watches, drift
correction, garbage collection (test operator kind `Stack`, real kubernetes.core)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from stacks import GROUP, VERSION, deployment, reconciled, stack

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually, get_custom

pytestmark = pytest.mark.cluster

OPERATOR = Path(__file__).resolve().parent.parent / "operator"
OWNER_ANNOTATION = "operator-sdk/primary-resource"
OWNER_TYPE_ANNOTATION = "operator-sdk/primary-resource-type"


@pytest.fixture(scope="module")
def operator(
    kube_cluster: Cluster, test_crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path_factory.mktemp("proxy-operator") / "operator.log",
    ).start()
    yield process
    process.stop()


def controller_reference(obj: Any) -> Any:
    return next((r for r in obj.metadata.owner_references or [] if r.controller), None)


def test_created_deployment_is_controlled_by_the_custom_object(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    owner = stack(kube_api, kube_namespace, "web", size=2)
    reconciled(kube_api, kube_namespace, "web")
    reference = controller_reference(deployment(kube_api, kube_namespace, "web"))
    assert reference is not None
    assert (reference.kind, reference.name, reference.uid) == (
        "Stack",
        "web",
        owner["metadata"]["uid"],
    )
    assert reference.block_owner_deletion is True
    assert reference.api_version == f"{GROUP}/{VERSION}"


def test_manual_edit_of_a_dependent_is_put_back_and_a_deleted_one_recreated(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    stack(kube_api, kube_namespace, "drift", size=2)
    reconciled(kube_api, kube_namespace, "drift")
    apps = client.AppsV1Api(kube_api)
    apps.patch_namespaced_deployment("drift", kube_namespace, {"spec": {"replicas": 7}})
    eventually(
        lambda: deployment(kube_api, kube_namespace, "drift").spec.replicas == 2,
        what="replicas put back to spec.size by the next run",
    )

    original_uid = deployment(kube_api, kube_namespace, "drift").metadata.uid
    apps.delete_namespaced_deployment("drift", kube_namespace)
    eventually(
        lambda: (
            (d := deployment(kube_api, kube_namespace, "drift")) is not None
            and d.metadata.uid != original_uid
        ),
        what="deleted Deployment recreated",
    )


def test_cluster_scoped_and_cross_namespace_dependents_get_annotations_and_retrigger(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    other = f"other-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other)))
    rbac = client.RbacAuthorizationV1Api(kube_api)
    role_name = f"stack-{kube_namespace}-wide"
    try:
        stack(kube_api, kube_namespace, "wide", clusterRole=True, otherNamespace=other)
        reconciled(kube_api, kube_namespace, "wide")
        expected = {
            OWNER_ANNOTATION: f"{kube_namespace}/wide",
            OWNER_TYPE_ANNOTATION: f"Stack.{GROUP}",
        }
        cluster_role = rbac.read_cluster_role(role_name)
        assert expected.items() <= (cluster_role.metadata.annotations or {}).items()
        assert not cluster_role.metadata.owner_references
        remote = core.read_namespaced_config_map("wide-remote", other)
        assert expected.items() <= (remote.metadata.annotations or {}).items()
        assert not remote.metadata.owner_references

        rbac.patch_cluster_role(role_name, {"rules": []})
        eventually(
            lambda: len(rbac.read_cluster_role(role_name).rules or []) == 1,
            what="cluster-scoped dependent put back",
        )
        core.patch_namespaced_config_map("wide-remote", other, {"data": {"owner": "mallory"}})
        eventually(
            lambda: (
                core.read_namespaced_config_map("wide-remote", other).data["owner"]
                == f"{kube_namespace}/wide"
            ),
            what="cross-namespace dependent put back",
        )
    finally:
        core.delete_namespace(other)
        try:
            rbac.delete_cluster_role(role_name)
        except client.ApiException as error:
            if error.status != 404:
                raise


def test_server_side_and_client_side_apply_get_the_owner_reference(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    owner = stack(kube_api, kube_namespace, "applied", serverSide=True, clientSide=True)
    reconciled(kube_api, kube_namespace, "applied")
    core = client.CoreV1Api(kube_api)
    for name in ("applied-applied", "applied-client-applied"):
        reference = controller_reference(core.read_namespaced_config_map(name, kube_namespace))
        assert reference is not None, name
        assert reference.uid == owner["metadata"]["uid"]
    # a second run re-applies; the reference stays
    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "stacks", "applied", {"spec": {"size": 2}}
    )
    reconciled(kube_api, kube_namespace, "applied", generation=2)
    for name in ("applied-applied", "applied-client-applied"):
        assert controller_reference(core.read_namespaced_config_map(name, kube_namespace))


def test_deleting_the_owner_garbage_collects_its_dependents(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    kube_namespace: str,
    kube_cluster: Cluster,
) -> None:
    if not kube_cluster.has_garbage_collector:
        pytest.skip("no garbage collector in this cluster (envtest)")
    stack(kube_api, kube_namespace, "doomed")
    reconciled(kube_api, kube_namespace, "doomed")
    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "stacks", "doomed"
    )
    eventually(
        lambda: deployment(kube_api, kube_namespace, "doomed") is None,
        what="Deployment garbage-collected with its owner",
    )


def test_objects_created_at_once_each_own_their_own_dependents(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    # Ten times the workers a two-core machine gives a watch: runs overlap at every step
    # of the proxy's marking.
    uids = {}
    for index in range(20):
        uids[f"s{index}"] = stack(kube_api, kube_namespace, f"s{index}")["metadata"]["uid"]

    def all_done() -> bool:
        for name in uids:
            obj = get_custom(kube_api, GROUP, VERSION, "stacks", kube_namespace, name)
            conditions = {
                c["type"]: c["status"] for c in (obj or {}).get("status", {}).get("conditions", [])
            }
            if conditions.get("Successful") != "True":
                return False
        return True

    eventually(all_done, timeout=600, interval=2, what="20 Stacks Successful")
    for name, uid in uids.items():
        references = deployment(kube_api, kube_namespace, name).metadata.owner_references
        assert [(r.name, r.uid) for r in references] == [(name, uid)]


def test_dependent_watch_comes_back_after_an_operator_restart(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    env = {"WATCH_NAMESPACE": kube_namespace}
    first = OperatorProcess(
        OPERATOR / "watches.yaml", kube_cluster.kubeconfig, log_path=tmp_path / "first.log", env=env
    ).start()
    try:
        stack(kube_api, kube_namespace, "phoenix", size=2)
        reconciled(kube_api, kube_namespace, "phoenix")
    finally:
        first.kill()
    second = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "second.log",
        env=env,
        args=[SERVE_METRICS],
    ).start()
    try:
        # It watches the dependents that exist again (its cache holds the Deployment).
        eventually(
            lambda: (
                second.metric("ansible_operator_cache_objects", informer="apps/v1/deployments") >= 1
            ),
            what="the Deployments watched again",
        )
        client.AppsV1Api(kube_api).patch_namespaced_deployment(
            "phoenix", kube_namespace, {"spec": {"replicas": 9}}
        )
        eventually(
            lambda: deployment(kube_api, kube_namespace, "phoenix").spec.replicas == 2,
            what="drift corrected by the restarted operator",
        )
    finally:
        second.stop()
