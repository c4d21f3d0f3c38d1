"""The Harbor cluster sample: roles/harborcluster.

The stand-in kinds (postgresql, RedisFailover, Tenant, Harbor) have no
controller here: the tests write their status as their own operators would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import (
    condition_of,
    eventually,
    get_custom,
    wait_for_condition,
)

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = "goharbor.io", "v1beta1", "harborclusters"
DEPENDENCY_CONDITIONS = ("DatabaseReady", "CacheReady", "StorageReady")
# (group, version, plural, name suffix, status its operator writes when ready)
DATABASE = ("acid.zalan.do", "v1", "postgresqls", "database", {"PostgresClusterStatus": "Running"})
CACHE = (
    "databases.spotahome.com",
    "v1",
    "redisfailovers",
    "cache",
    {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]},
)
STORAGE = ("minio.min.io", "v2", "tenants", "storage", {"currentState": "Initialized"})
HARBOR = (
    "goharbor.io",
    "v1beta1",
    "harbors",
    "",
    {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "up"}]},
)


@pytest.fixture(scope="module")
def operator(sample_operator) -> OperatorProcess:
    return sample_operator(
        "goharbor.io_harborclusters.yaml",
        "goharbor.io_harbors.yaml",
        "acid.zalan.do_postgresqls.yaml",
        "databases.spotahome.com_redisfailovers.yaml",
        "minio.min.io_tenants.yaml",
    )


def harbor_cluster(api: client.ApiClient, namespace: str, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HarborCluster",
        "metadata": {"name": name},
        "spec": {"version": "2.10.0", "externalURL": "https://harbor.example.com", **spec},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )


def patch_spec(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
    )


def owned(api: client.ApiClient, namespace: str, owner: str, dependent: tuple) -> dict | None:
    group, version, plural, suffix, _ = dependent
    name = f"{owner}-{suffix}" if suffix else owner
    return get_custom(api, group, version, plural, namespace, name)


def set_status(
    api: client.ApiClient, namespace: str, owner: str, dependent: tuple, status: dict | None = None
) -> None:
    """Write the dependent's status, as its operator would (default: ready)."""
    group, version, plural, suffix, ready = dependent
    name = f"{owner}-{suffix}" if suffix else owner
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        group, version, namespace, plural, name, {"status": ready if status is None else status}
    )


def wait_status(
    api: client.ApiClient, namespace: str, name: str, overall: str, **conditions: str
) -> dict[str, Any]:
    """Wait for status.status == overall and the given condition statuses."""

    def matches(obj: dict[str, Any]) -> bool:
        return obj["status"].get("status") == overall and all(
            (condition_of(obj, kind) or {}).get("status") == value
            for kind, value in conditions.items()
        )

    return wait_for_condition(
        api, GROUP, VERSION, PLURAL, namespace, name, "Successful", predicate=matches
    )


def assert_controlled_by(obj: dict[str, Any], owner: dict[str, Any]) -> None:
    [reference] = obj["metadata"]["ownerReferences"]
    assert reference["kind"] == "HarborCluster"
    assert reference["uid"] == owner["metadata"]["uid"]
    assert reference["controller"] is True


def test_dependencies_first_then_harbor_then_healthy_then_unhealthy(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    harbor_cluster(kube_api, kube_namespace, "reg", database={"replicas": 2})

    # create: the three dependencies, owned by the HarborCluster; no Harbor yet
    obj = wait_status(
        kube_api,
        kube_namespace,
        "reg",
        "creating",
        DatabaseReady="Unknown",
        CacheReady="Unknown",
        StorageReady="Unknown",
        ServiceReady="Unknown",
    )
    for dependent in (DATABASE, CACHE, STORAGE):
        assert_controlled_by(owned(kube_api, kube_namespace, "reg", dependent), obj)
    database = owned(kube_api, kube_namespace, "reg", DATABASE)
    assert database["spec"]["numberOfInstances"] == 2
    assert database["spec"]["teamId"] == "reg"
    assert owned(kube_api, kube_namespace, "reg", HARBOR) is None
    assert condition_of(obj, "DatabaseReady")["reason"] == "Pending"
    service = condition_of(obj, "ServiceReady")
    assert service["reason"] == "WaitingForDependencies"
    assert "DatabaseReady, CacheReady, StorageReady" in service["message"]

    # two ready: still no Harbor
    set_status(kube_api, kube_namespace, "reg", DATABASE)
    set_status(kube_api, kube_namespace, "reg", CACHE)
    obj = wait_status(
        kube_api,
        kube_namespace,
        "reg",
        "creating",
        DatabaseReady="True",
        CacheReady="True",
        StorageReady="Unknown",
    )
    assert condition_of(obj, "ServiceReady")["message"].endswith("StorageReady")
    assert owned(kube_api, kube_namespace, "reg", HARBOR) is None

    # the third ready: Harbor is applied, owned too, pointing at the dependencies
    set_status(kube_api, kube_namespace, "reg", STORAGE)
    harbor = eventually(
        lambda: owned(kube_api, kube_namespace, "reg", HARBOR), what="the Harbor object"
    )
    assert_controlled_by(harbor, obj)
    assert harbor["spec"]["database"]["hosts"] == [{"host": "reg-database", "port": 5432}]
    wait_status(kube_api, kube_namespace, "reg", "creating", StorageReady="True")

    # Harbor ready: healthy
    set_status(kube_api, kube_namespace, "reg", HARBOR)
    obj = wait_status(kube_api, kube_namespace, "reg", "healthy", ServiceReady="True")
    assert all(condition_of(obj, kind)["status"] == "True" for kind in DEPENDENCY_CONDITIONS)

    # a dependency no longer ready: unhealthy, Harbor left in place
    set_status(kube_api, kube_namespace, "reg", DATABASE, {"PostgresClusterStatus": "SyncFailed"})
    obj = wait_status(kube_api, kube_namespace, "reg", "unhealthy", DatabaseReady="False")
    database_ready = condition_of(obj, "DatabaseReady")
    assert database_ready["reason"] == "NotReady"
    assert database_ready["message"] == "postgresql/reg-database: reports SyncFailed"
    assert owned(kube_api, kube_namespace, "reg", HARBOR) is not None

    # ready again: healthy again
    set_status(kube_api, kube_namespace, "reg", DATABASE)
    wait_status(kube_api, kube_namespace, "reg", "healthy", DatabaseReady="True")


def test_configuration_is_applied_but_does_not_count_toward_status(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    harbor_cluster(kube_api, kube_namespace, "conf")
    obj = wait_status(kube_api, kube_namespace, "conf", "creating", ConfigurationReady="False")
    assert condition_of(obj, "ConfigurationReady")["reason"] == "NotConfigured"

    patch_spec(
        kube_api,
        kube_namespace,
        "conf",
        {"configuration": {"email_from": "harbor@example.com", "robotTokenDuration": 30}},
    )
    # configured, but the cluster is still creating: ConfigurationReady does not count
    obj = wait_status(kube_api, kube_namespace, "conf", "creating", ConfigurationReady="True")
    assert condition_of(obj, "ConfigurationReady")["reason"] == "Applied"
    config_map = client.CoreV1Api(kube_api).read_namespaced_config_map(
        "conf-configuration", kube_namespace
    )
    assert config_map.metadata.owner_references[0].uid == obj["metadata"]["uid"]
    # the keys as written in the spec (not snake_cased)
    assert '"robotTokenDuration": 30' in config_map.data["configuration.json"]

    # everything ready: healthy, and it stays healthy without configuration
    for dependent in (DATABASE, CACHE, STORAGE):
        set_status(kube_api, kube_namespace, "conf", dependent)
    eventually(lambda: owned(kube_api, kube_namespace, "conf", HARBOR), what="the Harbor object")
    set_status(kube_api, kube_namespace, "conf", HARBOR)
    wait_status(kube_api, kube_namespace, "conf", "healthy", ConfigurationReady="True")
    patch_spec(kube_api, kube_namespace, "conf", {"configuration": None})
    wait_status(kube_api, kube_namespace, "conf", "healthy", ConfigurationReady="False")
    eventually(
        lambda: (
            not client.CoreV1Api(kube_api)
            .list_namespaced_config_map(
                kube_namespace, field_selector="metadata.name=conf-configuration"
            )
            .items
        ),
        what="the configuration ConfigMap removed",
    )


def test_a_failed_dependency_apply_is_recorded_and_stops_the_run(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    # postgres-operator's CRD only accepts supported major versions
    harbor_cluster(kube_api, kube_namespace, "old", database={"version": "9.6"})
    obj = wait_for_condition(kube_api, GROUP, VERSION, PLURAL, kube_namespace, "old", "Failure")
    failure = condition_of(obj, "Failure")["message"]
    assert ") failed: postgresql/old-database: " in failure  # after the task's file:line
    assert "Unsupported value" in failure and "9.6" in failure
    database_ready = condition_of(obj, "DatabaseReady")
    assert database_ready["status"] == "False"
    assert database_ready["reason"] == "ApplyFailed"
    assert "9.6" in database_ready["message"]
    assert obj["status"]["status"] == "unhealthy"
    # the other two were applied concurrently all the same; Harbor was not
    assert owned(kube_api, kube_namespace, "old", CACHE) is not None
    assert owned(kube_api, kube_namespace, "old", STORAGE) is not None
    assert owned(kube_api, kube_namespace, "old", HARBOR) is None

    # fixed: the run succeeds, the database is created
    patch_spec(kube_api, kube_namespace, "old", {"database": {"version": "16"}})
    wait_status(kube_api, kube_namespace, "old", "creating", DatabaseReady="Unknown")
    assert owned(kube_api, kube_namespace, "old", DATABASE) is not None


def test_deleting_the_harbor_cluster_garbage_collects_what_it_owns(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    harbor_cluster(kube_api, kube_namespace, "gone", configuration={"email_from": "a@b.c"})
    for dependent in (DATABASE, CACHE, STORAGE):
        eventually(
            lambda dependent=dependent: owned(kube_api, kube_namespace, "gone", dependent),
            what=f"{dependent[2]} created",
        )
        set_status(kube_api, kube_namespace, "gone", dependent)
    eventually(lambda: owned(kube_api, kube_namespace, "gone", HARBOR), what="the Harbor object")

    client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, PLURAL, "gone"
    )

    def leftovers() -> list[str]:
        left = [
            d[2]
            for d in (DATABASE, CACHE, STORAGE, HARBOR)
            if owned(kube_api, kube_namespace, "gone", d)
        ]
        maps = client.CoreV1Api(kube_api).list_namespaced_config_map(
            kube_namespace, field_selector="metadata.name=gone-configuration"
        )
        return left + ["configmaps"] * len(maps.items)

    eventually(
        lambda: not leftovers(), describe=lambda: f"left: {leftovers()}", what="owned objects gone"
    )


# ----- v1alpha3, goharbor.io's older version: conversion, restart, storage migration ---
OLD = "v1alpha3"
CRD_NAME = f"{PLURAL}.{GROUP}"
KEPT = "conversion.ansible-operator.io/v1beta1"


def set_storage_version(api: client.ApiClient, version: str) -> None:
    """Which version new writes are stored in, as a CRD upgrade changes it."""
    extensions = client.ApiextensionsV1Api(api)
    crd = extensions.read_custom_resource_definition(CRD_NAME)
    patch = [
        {"op": "replace", "path": f"/spec/versions/{index}/storage", "value": each.name == version}
        for index, each in enumerate(crd.spec.versions)
    ]
    extensions.patch_custom_resource_definition(CRD_NAME, patch)


def read_in(api: client.ApiClient, version: str, namespace: str, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, version, namespace, PLURAL, name
    )


def stored_versions(api: client.ApiClient) -> list[str]:
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD_NAME)
    return list(crd.status.stored_versions)


def test_v1alpha3_objects_read_in_v1beta1_across_a_restart_and_a_storage_migration(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    kube_namespace: str,
    kube_cluster: Cluster,
) -> None:
    # Before v1beta1 was the storage version: objects written in v1alpha3, stored so.
    set_storage_version(kube_api, OLD)
    try:
        for index in range(3):
            client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
                GROUP,
                OLD,
                kube_namespace,
                PLURAL,
                {
                    "apiVersion": f"{GROUP}/{OLD}",
                    "kind": "HarborCluster",
                    "metadata": {"name": f"old-{index}"},
                    "spec": {
                        "version": "2.9.0",
                        "expose": {"scheme": "https", "host": f"old-{index}.example.com:8443"},
                        "inClusterDatabase": {"postgresSqlSpec": {"replicas": 2}},
                    },
                },
            )
    finally:
        set_storage_version(kube_api, VERSION)
    assert set(stored_versions(kube_api)) == {OLD, VERSION}
    # The role reads them in v1beta1, converted by the field map: it made their database.
    obj = wait_status(kube_api, kube_namespace, "old-0", "creating", DatabaseReady="Unknown")
    assert obj["spec"]["externalURL"] == "https://old-0.example.com:8443"
    assert obj["spec"]["database"] == {"replicas": 2, "storage": "1Gi", "version": "15"}
    assert owned(kube_api, kube_namespace, "old-0", DATABASE)["spec"]["numberOfInstances"] == 2

    # A v1beta1 object with what v1alpha3 cannot hold, edited through v1alpha3.
    harbor_cluster(
        kube_api, kube_namespace, "new", database={"version": "16"}, configuration={"a": "b"}
    )
    through_old = read_in(kube_api, OLD, kube_namespace, "new")
    assert through_old["spec"]["expose"] == {"scheme": "https", "host": "harbor.example.com"}
    assert json.loads(through_old["metadata"]["annotations"][KEPT]) == {
        "/spec/configuration": {"value": {"a": "b"}},
        "/spec/database/version": {"value": "16", "seen": "15"},
    }
    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        GROUP, OLD, kube_namespace, PLURAL, "new", {"spec": {"version": "2.11.0"}}
    )

    # Across a restart (a new CA and a new port: the CRD follows), read both ways again.
    operator.stop()
    operator.start()
    new = read_in(kube_api, VERSION, kube_namespace, "new")
    assert new["spec"]["version"] == "2.11.0"
    assert new["spec"]["configuration"] == {"a": "b"}
    assert new["spec"]["database"]["version"] == "16"
    assert read_in(kube_api, OLD, kube_namespace, "old-1")["spec"]["expose"]["host"] == (
        "old-1.example.com:8443"
    )

    # The storage migration, as a user runs it.
    done = subprocess.run(
        [sys.executable, "-m", "ansible_operator.cli", "migrate", "HarborCluster.goharbor.io"],
        env={**os.environ, "KUBECONFIG": str(kube_cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"migrating {CRD_NAME} to {VERSION}" in done.stdout
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("done: ")
    assert f"storedVersions: {OLD}, {VERSION} -> {VERSION}" in summary or (
        f"storedVersions: {VERSION}, {OLD} -> {VERSION}" in summary
    )
    assert stored_versions(kube_api) == [VERSION]
    for index in range(3):
        assert read_in(kube_api, OLD, kube_namespace, f"old-{index}")["spec"]["version"] == "2.9.0"
    # Nothing was left to do: a second run rewrites nothing.
    again = subprocess.run(
        [sys.executable, "-m", "ansible_operator.cli", "migrate", CRD_NAME],
        env={**os.environ, "KUBECONFIG": str(kube_cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert " 0 of them rewritten; storedVersions: v1beta1 -> v1beta1" in again.stdout
