"""API URL paths -> group, version, plural, namespace, name, subresource."""

from __future__ import annotations

import pytest

from ansible_operator.proxy.paths import ResourcePath, parse_resource_path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "/api/v1/namespaces/ns/configmaps/x",
            ResourcePath("", "v1", "configmaps", "ns", "x", None),
        ),
        (
            "/api/v1/namespaces/ns/configmaps",
            ResourcePath("", "v1", "configmaps", "ns", None, None),
        ),
        ("/api/v1/configmaps", ResourcePath("", "v1", "configmaps", None, None, None)),
        ("/api/v1/namespaces/x", ResourcePath("", "v1", "namespaces", None, "x", None)),
        ("/api/v1/namespaces", ResourcePath("", "v1", "namespaces", None, None, None)),
        ("/api/v1/namespaces/x/status", ResourcePath("", "v1", "namespaces", None, "x", "status")),
        (
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            ResourcePath("apps", "v1", "deployments", "ns", "d", "scale"),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
            ResourcePath("rbac.authorization.k8s.io", "v1", "clusterroles", None, "r", None),
        ),
        ("/api/v1/namespaces/ns/pods/p/exec", ResourcePath("", "v1", "pods", "ns", "p", "exec")),
    ],
)
def test_resource_paths(path: str, expected: ResourcePath) -> None:
    assert parse_resource_path(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps/v1",
        "/version",
        "/openapi/v3",
        "/apis/apps",
        "/api/v1/watch/configmaps",
    ],
)
def test_non_resource_paths(path: str) -> None:
    assert parse_resource_path(path) is None
