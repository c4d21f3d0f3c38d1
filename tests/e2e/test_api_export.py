"""kube-bind's APIServiceExport controller: while the referenced CRD and the
consumer's APIServiceBinding exist, a syncer (ConfigMap <export>-syncer) runs;
Connected follows the binding, ConsumerInSync its SchemaInSync condition, the
CRD's conditions are copied, and Ready summarises them all. Role apiserviceexport.

Each test makes its own tiny CRD (the exported API) and plays the consumer's
agent by writing the binding's status."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.testing.manifests import wait_crds_established
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import (
    condition_of,
    eventually,
    get_custom,
    wait_for_condition,
)

pytestmark = pytest.mark.cluster

GROUP, VERSION = "kube-bind.io", "v1alpha1"


@pytest.fixture(scope="module")
def operator(sample_operator: Any) -> OperatorProcess:
    return sample_operator(
        "kube-bind.io_apiserviceexports.yaml", "kube-bind.io_apiservicebindings.yaml"
    )


@pytest.fixture
def logs_on_failure(operator: OperatorProcess) -> Any:
    """Print the operator log's tail; pytest shows it only for failed tests."""
    yield
    print(f"operator log: {operator.log_path}\n{operator.logs[-6000:]}")


@pytest.fixture
def exported_crd(kube_api: client.ApiClient, kube_namespace: str) -> Iterator[str]:
    """The name of a tiny CRD, unique to the test; `make_crd()` creates it.
    It is deleted at the end, as are the test's bindings (cluster-scoped)."""
    name = f"gadgets.{kube_namespace}.kube-bind.test"
    yield name
    extensions = client.ApiextensionsV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    for delete in (
        lambda: extensions.delete_custom_resource_definition(name),
        lambda: custom.delete_cluster_custom_object(GROUP, VERSION, "apiservicebindings", name),
    ):
        try:
            delete()
        except client.ApiException as error:
            if error.status != 404:
                raise


def make_crd(api: client.ApiClient, name: str) -> None:
    plural, _, group = name.partition(".")
    client.ApiextensionsV1Api(api).create_custom_resource_definition(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "names": {"kind": "Gadget", "plural": plural, "singular": "gadget"},
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
    )
    wait_crds_established(api, [name])


def create_export(
    api: client.ApiClient, namespace: str, crd: str, binding: str | None = None
) -> dict[str, Any]:
    """An export named like its CRD (kube-bind's convention)."""
    spec = {"crdName": crd, **({"bindingName": binding} if binding else {})}
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "apiserviceexports",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "APIServiceExport",
            "metadata": {"name": crd},
            "spec": spec,
        },
    )


def create_binding(api: client.ApiClient, name: str) -> None:
    client.CustomObjectsApi(api).create_cluster_custom_object(
        GROUP,
        VERSION,
        "apiservicebindings",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "APIServiceBinding",
            "metadata": {"name": name},
        },
    )


def set_schema_in_sync(
    api: client.ApiClient, name: str, status: str, reason: str, message: str
) -> None:
    """What the consumer's agent reports on its binding."""
    condition = {
        "type": "SchemaInSync",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    client.CustomObjectsApi(api).patch_cluster_custom_object_status(
        GROUP, VERSION, "apiservicebindings", name, {"status": {"conditions": [condition]}}
    )


def delete_binding(api: client.ApiClient, name: str) -> None:
    client.CustomObjectsApi(api).delete_cluster_custom_object(
        GROUP, VERSION, "apiservicebindings", name
    )


def syncer(api: client.ApiClient, namespace: str, export: str) -> client.V1ConfigMap | None:
    try:
        return client.CoreV1Api(api).read_namespaced_config_map(f"{export}-syncer", namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def wait_export(
    api: client.ApiClient,
    namespace: str,
    name: str,
    condition: str,
    status: str = "True",
    predicate: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    return wait_for_condition(
        api,
        GROUP,
        VERSION,
        "apiserviceexports",
        namespace,
        name,
        condition,
        status,
        predicate=predicate,
    )


def reason_is(condition: str, reason: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (condition_of(obj, condition) or {}).get("reason") == reason


def test_without_crd_or_binding_no_syncer_runs(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    kube_namespace: str,
    exported_crd: str,
    logs_on_failure,
) -> None:
    # The export references a CRD that does not exist (yet).
    create_export(kube_api, kube_namespace, exported_crd)
    export = wait_export(
        kube_api,
        kube_namespace,
        exported_crd,
        "Ready",
        "False",
        reason_is("Ready", "CustomResourceDefinitionNotFound"),
    )
    assert exported_crd in condition_of(export, "Ready")["message"]
    assert export["status"]["syncer"] == ""
    assert syncer(kube_api, kube_namespace, exported_crd) is None

    # The CRD appears, but no consumer has bound it.
    make_crd(kube_api, exported_crd)
    export = wait_export(kube_api, kube_namespace, exported_crd, "Connected", "False")
    assert condition_of(export, "Connected")["reason"] == "APIServiceBindingNotFound"
    assert condition_of(export, "ConsumerInSync")["status"] == "False"
    ready = condition_of(export, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "APIServiceBindingNotFound")
    assert syncer(kube_api, kube_namespace, exported_crd) is None


def test_binding_starts_the_syncer_and_its_schema_state_drives_ready(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    kube_namespace: str,
    exported_crd: str,
    logs_on_failure,
) -> None:
    make_crd(kube_api, exported_crd)
    # The binding is named explicitly here (by default: the export's name).
    binding = exported_crd
    export = create_export(kube_api, kube_namespace, exported_crd, binding=binding)
    wait_export(kube_api, kube_namespace, exported_crd, "Connected", "False")

    # Binding created: the syncer starts, owned by the export.
    create_binding(kube_api, binding)
    connected = wait_export(kube_api, kube_namespace, exported_crd, "Connected")
    assert connected["status"]["syncer"] == f"{exported_crd}-syncer"
    started = syncer(kube_api, kube_namespace, exported_crd)
    assert started is not None
    assert started.data["customResourceDefinition"] == exported_crd
    assert started.data["version"] == "v1"
    owner = started.metadata.owner_references[0]
    assert (owner.kind, owner.uid, owner.controller) == (
        "APIServiceExport",
        export["metadata"]["uid"],
        True,
    )
    # The consumer has not reported on the schema yet.
    assert condition_of(connected, "ConsumerInSync")["status"] == "Unknown"
    assert condition_of(connected, "Ready")["status"] == "False"

    # The consumer's schema drifted.
    set_schema_in_sync(kube_api, binding, "False", "SchemaDrift", "field spec.size differs")
    drifted = wait_export(kube_api, kube_namespace, exported_crd, "ConsumerInSync", "False")
    assert condition_of(drifted, "ConsumerInSync")["reason"] == "SchemaDrift"
    ready = condition_of(drifted, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "SchemaDrift")
    assert "field spec.size differs" in ready["message"]

    # In sync: the CRD's conditions are copied, and everything is True.
    set_schema_in_sync(kube_api, binding, "True", "InSync", "schema matches")
    ready_export = wait_export(kube_api, kube_namespace, exported_crd, "Ready")
    assert condition_of(ready_export, "ConsumerInSync")["status"] == "True"
    assert condition_of(ready_export, "Established")["status"] == "True"
    assert condition_of(ready_export, "NamesAccepted")["status"] == "True"
    assert condition_of(ready_export, "Connected")["status"] == "True"

    # Binding deleted: the syncer stops.
    delete_binding(kube_api, binding)
    stopped = wait_export(kube_api, kube_namespace, exported_crd, "Connected", "False")
    assert condition_of(stopped, "Ready")["status"] == "False"
    assert stopped["status"]["syncer"] == ""
    assert syncer(kube_api, kube_namespace, exported_crd) is None


def test_deleting_the_export_leaves_nothing_behind(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    kube_namespace: str,
    exported_crd: str,
    logs_on_failure,
) -> None:
    make_crd(kube_api, exported_crd)
    create_binding(kube_api, exported_crd)  # named like the export: found by default
    set_schema_in_sync(kube_api, exported_crd, "True", "InSync", "schema matches")
    create_export(kube_api, kube_namespace, exported_crd)
    wait_export(kube_api, kube_namespace, exported_crd, "Ready")
    assert syncer(kube_api, kube_namespace, exported_crd) is not None

    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "apiserviceexports", exported_crd
    )
    eventually(
        lambda: (
            get_custom(kube_api, GROUP, VERSION, "apiserviceexports", kube_namespace, exported_crd)
            is None
            and syncer(kube_api, kube_namespace, exported_crd) is None
        ),
        what="export and its syncer gone",
    )
