"""The local control plane is the real thing: schema validation, finalizers,
garbage collection, namespace deletion and RBAC all behave as in a cluster."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kubernetes import client, config

from ansible_operator.cluster import Cluster
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

GROUP = "controlplane.test.example.com"


@pytest.fixture(scope="module")
def widget_crd(kube_api: client.ApiClient) -> str:
    """A CRD with a structural schema, a status subresource and printer columns."""
    plural = f"widgets{uuid.uuid4().hex[:6]}"
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": plural[:-1],
                "kind": "Widget" + plural[7:],
                "listKind": "Widget" + plural[7:] + "List",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                    },
                                    "required": ["size"],
                                },
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
    extensions = client.ApiextensionsV1Api(kube_api)
    extensions.create_custom_resource_definition(body)

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(f"{plural}.{GROUP}")
        return any(
            c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])
        )

    eventually(established, timeout=30.0, what="CRD Established")
    yield plural
    extensions.delete_custom_resource_definition(f"{plural}.{GROUP}")


def widget(plural: str, name: str, size: Any, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget" + plural[7:],
        "metadata": {"name": name, **metadata},
        "spec": {"size": size},
    }


def test_version_is_the_stamped_kubernetes_release(
    kube_api: client.ApiClient, kube_cluster: Cluster
) -> None:
    version = client.VersionApi(kube_api).get_code()
    if kube_cluster.source == "local":
        assert version.git_version == "v1.36.3"
    assert version.major == "1"


def test_crd_with_structural_schema_is_served_and_validates(
    kube_api: client.ApiClient, widget_crd: str, kube_namespace: str
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    created = custom.create_namespaced_custom_object(
        GROUP, "v1", kube_namespace, widget_crd, widget(widget_crd, "ok", 3)
    )
    assert created["spec"]["size"] == 3

    with pytest.raises(client.ApiException) as too_big:
        custom.create_namespaced_custom_object(
            GROUP, "v1", kube_namespace, widget_crd, widget(widget_crd, "too-big", 11)
        )
    assert too_big.value.status == 422
    assert "spec.size" in too_big.value.body

    with pytest.raises(client.ApiException) as wrong_type:
        custom.create_namespaced_custom_object(
            GROUP, "v1", kube_namespace, widget_crd, widget(widget_crd, "text", "three")
        )
    assert wrong_type.value.status == 422

    # The status subresource: a status write does not change spec, and a main
    # resource update does not change status.
    custom.patch_namespaced_custom_object_status(
        GROUP, "v1", kube_namespace, widget_crd, "ok", {"status": {"phase": "Ready"}}
    )
    current = custom.get_namespaced_custom_object(GROUP, "v1", kube_namespace, widget_crd, "ok")
    assert current["status"] == {"phase": "Ready"}
    current["status"] = {"phase": "Overwritten"}
    current["spec"]["size"] = 4
    updated = custom.replace_namespaced_custom_object(
        GROUP, "v1", kube_namespace, widget_crd, "ok", current
    )
    assert updated["spec"]["size"] == 4
    assert updated["status"] == {"phase": "Ready"}
    assert updated["metadata"]["generation"] == 2


def test_object_with_finalizer_stays_until_finalizer_removed(
    kube_api: client.ApiClient, widget_crd: str, kube_namespace: str
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(
        GROUP,
        "v1",
        kube_namespace,
        widget_crd,
        widget(widget_crd, "held", 1, finalizers=["test.example.com/cleanup"]),
    )
    custom.delete_namespaced_custom_object(GROUP, "v1", kube_namespace, widget_crd, "held")

    held = custom.get_namespaced_custom_object(GROUP, "v1", kube_namespace, widget_crd, "held")
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["test.example.com/cleanup"]
    time.sleep(1)
    assert custom.get_namespaced_custom_object(GROUP, "v1", kube_namespace, widget_crd, "held")

    custom.patch_namespaced_custom_object(
        GROUP, "v1", kube_namespace, widget_crd, "held", {"metadata": {"finalizers": None}}
    )

    def gone() -> bool:
        try:
            custom.get_namespaced_custom_object(GROUP, "v1", kube_namespace, widget_crd, "held")
        except client.ApiException as error:
            return error.status == 404
        return False

    eventually(gone, timeout=30.0, what="object gone after its finalizer was removed")


def test_owned_configmap_is_garbage_collected_after_owner_deleted(
    kube_api: client.ApiClient, kube_cluster: Cluster, widget_crd: str, kube_namespace: str
) -> None:
    if not kube_cluster.has_garbage_collector:
        pytest.skip("envtest binaries have no kube-controller-manager, so no garbage collector")
    custom = client.CustomObjectsApi(kube_api)
    core = client.CoreV1Api(kube_api)
    owner = custom.create_namespaced_custom_object(
        GROUP, "v1", kube_namespace, widget_crd, widget(widget_crd, "owner", 2)
    )
    reference = client.V1OwnerReference(
        api_version=f"{GROUP}/v1",
        kind=owner["kind"],
        name="owner",
        uid=owner["metadata"]["uid"],
        controller=True,
        block_owner_deletion=True,
    )
    core.create_namespaced_config_map(
        kube_namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="owned", owner_references=[reference]),
            data={"k": "v"},
        ),
    )
    core.create_namespaced_config_map(
        kube_namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="unowned"), data={"k": "v"}),
    )

    custom.delete_namespaced_custom_object(GROUP, "v1", kube_namespace, widget_crd, "owner")

    def collected() -> bool:
        names = {cm.metadata.name for cm in core.list_namespaced_config_map(kube_namespace).items}
        return "owned" not in names

    # The garbage collector looks for new kinds (the CRD made for this test) every
    # 30 s, then starts and syncs a monitor for them: the collection itself can come
    # a little after 30 s, so a 30 s wait failed about every time under load.
    eventually(collected, timeout=90.0, what="owned ConfigMap garbage-collected")
    assert core.read_namespaced_config_map("unowned", kube_namespace).data == {"k": "v"}


def test_namespace_deletion_completes(kube_api: client.ApiClient, kube_cluster: Cluster) -> None:
    if not kube_cluster.has_garbage_collector:
        pytest.skip("envtest binaries have no kube-controller-manager, so namespaces never finish")
    core = client.CoreV1Api(kube_api)
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_config_map(
        name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="content"), data={"a": "b"})
    )
    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except client.ApiException as error:
            return error.status == 404
        return False

    eventually(gone, timeout=60, what=f"namespace {name} deleted")


def test_user_without_rbac_is_forbidden_until_bound_to_a_role(
    kube_api: client.ApiClient, kube_cluster: Cluster, kube_namespace: str
) -> None:
    if kube_cluster.control_plane is None:
        pytest.skip("issuing a new user's certificate needs our local control plane's CA")
    user = f"restricted-{uuid.uuid4().hex[:6]}"
    kubeconfig = kube_cluster.control_plane.user_kubeconfig(user)
    with config.new_client_from_config(str(kubeconfig)) as restricted_api:
        restricted = client.CoreV1Api(restricted_api)
        with pytest.raises(client.ApiException) as denied:
            restricted.list_namespaced_config_map(kube_namespace)
        assert denied.value.status == 403
        assert user in denied.value.body

        rbac = client.RbacAuthorizationV1Api(kube_api)
        rbac.create_namespaced_role(
            kube_namespace,
            client.V1Role(
                metadata=client.V1ObjectMeta(name="read-configmaps"),
                rules=[
                    client.V1PolicyRule(
                        api_groups=[""], resources=["configmaps"], verbs=["get", "list"]
                    )
                ],
            ),
        )
        rbac.create_namespaced_role_binding(
            kube_namespace,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="read-configmaps"),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="Role", name="read-configmaps"
                ),
                subjects=[
                    client.RbacV1Subject(
                        kind="User", name=user, api_group="rbac.authorization.k8s.io"
                    )
                ],
            ),
        )

        def allowed() -> bool:
            try:
                restricted.list_namespaced_config_map(kube_namespace)
            except client.ApiException as error:
                if error.status == 403:
                    return False
                raise
            return True

        eventually(allowed, timeout=30.0, what="access after the RoleBinding")
        with pytest.raises(client.ApiException) as still_denied:
            restricted.create_namespaced_config_map(
                kube_namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="nope"))
            )
        assert still_denied.value.status == 403
