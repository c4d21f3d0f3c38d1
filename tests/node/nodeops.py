"""Helpers for the node tests: the session's node, waiting, reading Pods."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from ansible_operator.cluster import local_binaries
from ansible_operator.cluster.images import Image, ImageBuilder
from ansible_operator.cluster.local import LocalControlPlane
from ansible_operator.cluster.node import LocalNode, node_unavailable_reason
from ansible_operator.testing.waiting import eventually


@dataclass
class NodeCluster:
    plane: LocalControlPlane
    node: LocalNode
    api: client.ApiClient
    images: ImageBuilder

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)


class SessionNode:
    """Starts the session's node on first use; `stop()` frees the machine's one
    node slot for a test that needs it, and the next use starts it again."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.images = ImageBuilder()
        self.cluster: NodeCluster | None = None
        self._starts = 0

    def get(self) -> NodeCluster:
        if self.cluster is None:
            reason = node_unavailable_reason()  # another session may have taken the slot
            if reason:
                pytest.skip(f"no node here: {reason}")
            self._starts += 1
            state = self.directory / f"cluster-{self._starts}"
            plane = LocalControlPlane(state, local_binaries(), node=True)
            plane.start()
            node = LocalNode(plane, self.images)
            try:
                node.start(images=[self.images.test_python()])
            except BaseException:
                plane.stop()
                raise
            api = config.new_client_from_config(str(plane.kubeconfig))
            self.cluster = NodeCluster(plane, node, api, self.images)
        return self.cluster

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.api.close()
            self.cluster.node.stop()
            self.cluster.plane.stop()
            self.cluster = None


def has_default_service_account(core: client.CoreV1Api, namespace: str) -> bool:
    accounts = core.list_namespaced_service_account(namespace).items
    return any(account.metadata.name == "default" for account in accounts)


def wait_for(
    check: Callable[[], object],
    what: str,
    timeout: float = 60.0,
    details: Callable[[], str] | None = None,
) -> object:
    """`eventually` (the one poll loop of the tests) in the node tests' words:
    `details` tells what to show on time-out (the operator's log, say)."""
    return eventually(check, timeout=timeout, interval=0.1, describe=details, what=what)


def ready_lease_holder(cluster: NodeCluster, lease: str, namespace: str) -> client.V1Pod | None:
    """The Pod holding the leader Lease `lease` in `namespace`, once it is Ready."""
    try:
        held = client.CoordinationV1Api(cluster.api).read_namespaced_lease(lease, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    holder = (held.spec.holder_identity or "").split("_")[0]
    for pod in cluster.core.list_namespaced_pod(namespace).items:
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
        if pod.metadata.name == holder and ready:
            return pod
    return None


def pod_logs(cluster: NodeCluster, namespace: str, tail_lines: int) -> str:
    """The last lines of every Pod's log in `namespace`, for failure messages."""
    logs = []
    for pod in cluster.core.list_namespaced_pod(namespace).items:
        try:
            text = cluster.core.read_namespaced_pod_log(
                pod.metadata.name, namespace, tail_lines=tail_lines
            )
        except client.ApiException as error:
            text = f"(no log: {error.reason})"
        logs.append(f"--- {pod.metadata.name} {pod.status.phase}\n{text}")
    return "\n".join(logs)


def pod_phase(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    try:
        return core.read_namespaced_pod(name, namespace).status.phase
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def python_pod(name: str, image: Image, script: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": image.name, "command": ["python3", "-c", script]}
            ],
            **spec,
        },
    }
