"""A real node for the tests in this folder: kubelet and containerd joined to a
local control plane, Pods running for real from images built here.

They run only where a node can (root, Linux, Debian's packages at hand, no
other node on this machine); elsewhere they are reported as skipped, with the
reason. One node serves the whole session: it starts on first use.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from nodeops import NodeCluster, SessionNode, has_default_service_account, wait_for

from ansible_operator.cluster.images import Image
from ansible_operator.cluster.node import node_unavailable_reason


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "node: needs a real node (root, kubelet, containerd); skipped elsewhere"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    node_items = [item for item in items if item.get_closest_marker("node")]
    if not node_items:
        return
    reason = node_unavailable_reason()
    if reason:
        for item in node_items:
            item.add_marker(pytest.mark.skip(reason=f"no node here: {reason}"))


@pytest.fixture(scope="session")
def session_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionNode]:
    manager = SessionNode(tmp_path_factory.mktemp("node"))
    yield manager
    manager.stop()


@pytest.fixture
def node_cluster(session_node: SessionNode) -> NodeCluster:
    return session_node.get()


@pytest.fixture
def python_image(node_cluster: NodeCluster) -> Image:
    return node_cluster.images.test_python()


@pytest.fixture
def pod_namespace(node_cluster: NodeCluster) -> Iterator[str]:
    """A fresh namespace whose `default` ServiceAccount exists (Pods need it)."""
    name = f"node-{uuid.uuid4().hex[:8]}"
    core = node_cluster.core
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_for(lambda: has_default_service_account(core, name), "the default ServiceAccount")
    yield name
    core.delete_namespace(name, grace_period_seconds=0)
