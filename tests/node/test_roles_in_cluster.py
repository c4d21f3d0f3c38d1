"""Roles that talk to real Pods and meet real RBAC, with the operator running
in the cluster as a Pod: the operator image as it is, a test operator's
watches.yaml and roles (tests/node/operator/) mounted where an operator image
keeps them, its ServiceAccount limited by the Role in deploy.yaml."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from nodeops import NodeCluster, SessionNode, has_default_service_account, python_pod, wait_for

from ansible_operator.testing.manifests import apply_manifests, documents

pytestmark = pytest.mark.node

OPERATOR_DIR = Path(__file__).parent / "operator"
NAMESPACE = "roles-e2e"  # deploy.yaml's
GROUP, VERSION = "e2e.example.com", "v1alpha1"
TARGET_SCRIPT = "import os, time; print(os.environ['LOG_TOKEN'], flush=True); time.sleep(3600)"


def operator_files() -> dict[str, str]:
    """watches.yaml and roles/, keyed by their path under tests/node/operator/."""
    paths = [OPERATOR_DIR / "watches.yaml", *sorted((OPERATOR_DIR / "roles").rglob("*.yml"))]
    return {str(path.relative_to(OPERATOR_DIR)): path.read_text() for path in paths}


def operator_manifests(image: str) -> list[dict[str, Any]]:
    """deploy.yaml, plus the ConfigMap of the operator's files it mounts
    (ConfigMap keys hold no '/': each file gets a flat key, mapped to its path)."""
    files = operator_files()
    keys = {path: path.replace("/", ".") for path in files}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "test-operator", "namespace": NAMESPACE},
        "data": {keys[path]: text for path, text in files.items()},
    }
    docs = documents(OPERATOR_DIR / "deploy.yaml")
    deployment = next(doc for doc in docs if doc["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    pod["containers"][0]["image"] = image
    pod["volumes"][0]["configMap"]["items"] = [
        {"key": key, "path": path} for path, key in keys.items()
    ]
    return [config_map, *docs]


@pytest.fixture(scope="module")
def test_operator(session_node: SessionNode) -> Iterator[NodeCluster]:
    cluster = session_node.get()
    image = cluster.images.operator()
    cluster.node.load([image])
    apply_manifests(cluster.api, OPERATOR_DIR / "crds.yaml")
    cluster.core.create_namespace({"metadata": {"name": NAMESPACE}})
    try:
        wait_for(lambda: has_default_service_account(cluster.core, NAMESPACE), "a ServiceAccount")
        apply_manifests(cluster.api, yaml.safe_dump_all(operator_manifests(image.name)))
        yield cluster
    finally:
        cluster.core.delete_namespace(NAMESPACE, grace_period_seconds=0)
        extensions = client.ApiextensionsV1Api(cluster.api)
        for doc in documents(OPERATOR_DIR / "crds.yaml"):
            extensions.delete_custom_resource_definition(doc["metadata"]["name"])


def create(cluster: NodeCluster, kind: str, name: str, spec: dict[str, Any]) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}}
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, f"{kind.lower()}s", {**body, "spec": spec}
    )


def conditions(cluster: NodeCluster, kind: str, name: str) -> dict[str, dict[str, Any]]:
    obj = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, f"{kind.lower()}s", name
    )
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def settled(cluster: NodeCluster, kind: str, name: str) -> dict[str, dict[str, Any]] | None:
    """The object's conditions, by type and status, once a run has finished."""
    found = conditions(cluster, kind, name)
    status = {type_: condition["status"] for type_, condition in found.items()}
    done = "True" in (status.get("Successful"), status.get("Failure"))
    return found if done and status.get("Running") != "True" else None


def operator_log(cluster: NodeCluster) -> str:
    pods = cluster.core.list_namespaced_pod(NAMESPACE, label_selector="app=test-operator").items
    logs = []
    for pod in pods:
        try:
            text = cluster.core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE, tail_lines=40)
        except client.ApiException as error:
            text = f"(no log: {error.reason})"
        logs.append(f"--- {pod.metadata.name} {pod.status.phase}\n{text}")
    return "\n".join(logs)


def config_map_data(cluster: NodeCluster, name: str) -> dict[str, str] | None:
    try:
        return cluster.core.read_namespaced_config_map(name, NAMESPACE).data
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def test_a_role_execs_in_a_pod_and_reads_its_log(test_operator: NodeCluster) -> None:
    python_image = test_operator.images.test_python()
    exec_token, log_token = f"exec-{uuid.uuid4().hex}", f"log-{uuid.uuid4().hex}"
    target = python_pod("target", python_image, TARGET_SCRIPT)
    target["spec"]["containers"][0]["env"] = [
        {"name": "EXEC_TOKEN", "value": exec_token},
        {"name": "LOG_TOKEN", "value": log_token},
    ]
    test_operator.core.create_namespaced_pod(NAMESPACE, target)

    def target_logged() -> bool:
        log = test_operator.core.read_namespaced_pod_log("target", NAMESPACE)
        return log_token in log

    wait_for(
        lambda: (
            test_operator.core.read_namespaced_pod("target", NAMESPACE).status.phase == "Running"
        ),
        "the target Pod to run",
        timeout=120,
    )
    wait_for(target_logged, "the target Pod's log line")
    create(test_operator, "PodProbe", "probe", {"pod": "target"})

    found = wait_for(
        lambda: settled(test_operator, "PodProbe", "probe"), "the PodProbe's run", timeout=240
    )
    assert found["Successful"]["status"] == "True", f"{found}\n{operator_log(test_operator)}"
    result = config_map_data(test_operator, "probe-result")
    assert result is not None, operator_log(test_operator)
    assert result["exec_stdout"].strip() == exec_token
    assert result["exec_rc"] == "0"
    assert result["log"].strip() == log_token


def test_a_role_writing_outside_its_rbac_fails_naming_verb_and_resource(
    test_operator: NodeCluster,
) -> None:
    create(test_operator, "SecretWriter", "writer", {})

    found = wait_for(
        lambda: settled(test_operator, "SecretWriter", "writer"),
        "the SecretWriter's run",
        timeout=240,
    )
    failure = found.get("Failure", {})
    assert failure.get("status") == "True", f"{found}\n{operator_log(test_operator)}"
    message = failure["message"]
    assert re.search(r"may not create secrets in namespace roles-e2e\b", message), message
    assert "config/rbac/role.yaml" in message, message  # where to allow it
    assert "system:serviceaccount:roles-e2e:test-operator" in message, message
    with pytest.raises(client.ApiException) as missing:
        test_operator.core.read_namespaced_secret("writer", NAMESPACE)
    assert missing.value.status == 404
