"""Pods on the local node: they run, reach the API server through the
`kubernetes` Service with their own ServiceAccount token, and the API server
reaches them for logs and exec."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.stream import stream
from nodeops import NodeCluster, pod_phase, python_pod, wait_for

from ansible_operator.cluster import host
from ansible_operator.cluster.images import Image
from ansible_operator.cluster.node import NODE_NAME

pytestmark = pytest.mark.node

# Runs in the Pod: what a client in a cluster does, with nothing but the files
# Kubernetes mounts and the variables it sets.
CALL_API = """
import json, os, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(f"{sa}/token").read()
namespace = open(f"{sa}/namespace").read()
base = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
tls = ssl.create_default_context(cafile=f"{sa}/ca.crt")

def call(path, body=None):
    request = urllib.request.Request(base + path, data=body and json.dumps(body).encode())
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, context=tls, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, None

review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
_, who = call("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
status, pods = call(f"/api/v1/namespaces/{namespace}/pods")
forbidden, _ = call("/api/v1/secrets")
print(json.dumps({
    "base": base,
    "user": who["status"]["userInfo"]["username"],
    "pods_status": status,
    "pods": [p["metadata"]["name"] for p in pods["items"]],
    "all_secrets_status": forbidden,
}))
"""


def test_node_is_ready_with_its_address_and_version(node_cluster: NodeCluster) -> None:
    node = node_cluster.core.read_node(NODE_NAME)
    conditions = {c.type: c.status for c in node.status.conditions}
    assert conditions["Ready"] == "True"
    assert not node.spec.taints
    addresses = {a.type: a.address for a in node.status.addresses}
    assert addresses["InternalIP"] == host.NODE_IP
    assert node.status.node_info.kubelet_version == "v1.36.3"
    assert node.status.node_info.container_runtime_version.startswith("containerd://")


def test_pod_calls_the_api_through_the_kubernetes_service_with_its_token(
    node_cluster: NodeCluster, pod_namespace: str, python_image: Image
) -> None:
    core = node_cluster.core
    # The Pod's ServiceAccount may read Pods in its namespace, nothing else.
    client.RbacAuthorizationV1Api(node_cluster.api).create_namespaced_role_binding(
        pod_namespace,
        {
            "metadata": {"name": "default-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default",
                          "namespace": pod_namespace}],
        },
    )  # fmt: skip
    core.create_namespaced_pod(pod_namespace, python_pod("caller", python_image, CALL_API))

    phase = wait_for(
        lambda: pod_phase(core, pod_namespace, "caller") in ("Succeeded", "Failed") and 1,
        "the caller Pod to finish",
    )
    log = core.read_namespaced_pod_log("caller", pod_namespace)
    assert phase and pod_phase(core, pod_namespace, "caller") == "Succeeded", log
    result = json.loads(log.strip().splitlines()[-1])
    assert result["base"] == f"https://{host.SERVICE_IP}:443"
    assert result["user"] == f"system:serviceaccount:{pod_namespace}:default"
    assert result["pods_status"] == 200
    assert "caller" in result["pods"]
    assert result["all_secrets_status"] == 403


def test_logs_and_exec_go_through_the_api_server_to_the_node(
    node_cluster: NodeCluster, pod_namespace: str, python_image: Image
) -> None:
    core = node_cluster.core
    script = "import time; print('hello from the node', flush=True); time.sleep(600)"
    core.create_namespaced_pod(pod_namespace, python_pod("talker", python_image, script))
    wait_for(lambda: pod_phase(core, pod_namespace, "talker") == "Running", "talker Running")

    wait_for(
        lambda: "hello from the node" in core.read_namespaced_pod_log("talker", pod_namespace),
        "the Pod's log line",
    )
    output = stream(
        core.connect_get_namespaced_pod_exec,
        "talker",
        pod_namespace,
        command=["python3", "-c", "import socket; print(socket.gethostname(), 6 * 7)"],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    assert output.split() == ["talker", "42"]


def test_scheduler_places_a_deployments_pods_on_the_node(
    node_cluster: NodeCluster, pod_namespace: str, python_image: Image
) -> None:
    labels = {"app": "sleeper"}
    client.AppsV1Api(node_cluster.api).create_namespaced_deployment(
        pod_namespace,
        {
            "metadata": {"name": "sleeper"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "containers": [
                            {"name": "main", "image": python_image.name,
                             "command": ["python3", "-c", "import time; time.sleep(600)"]}
                        ],
                    },
                },
            },
        },
    )  # fmt: skip
    apps = client.AppsV1Api(node_cluster.api)
    wait_for(
        lambda: (
            apps.read_namespaced_deployment("sleeper", pod_namespace).status.ready_replicas == 2
        ),
        "2 ready replicas",
    )
    pods = node_cluster.core.list_namespaced_pod(pod_namespace, label_selector="app=sleeper")
    assert {pod.spec.node_name for pod in pods.items} == {NODE_NAME}
