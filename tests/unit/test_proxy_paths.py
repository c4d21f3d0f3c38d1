"""API URL paths -> group, version, plural, namespace, name, subresource."""

from __future__ import annotations

import pytest

from ansible_operator.proxy.paths import (
    ResourcePath,
    UnsafePathError,
    decoded_path,
    parse_resource_path,
)


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


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("/api/v1/namespaces/ns/configmaps/x", "/api/v1/namespaces/ns/configmaps/x"),
        ("/api/v1/namespaces/ns/config%6Daps/x", "/api/v1/namespaces/ns/configmaps/x"),
        ("/apis/", "/apis/"),
        ("/", "/"),
        (
            "/api/v1/namespaces/ns/pods/p:8080/proxy/a%20b",
            "/api/v1/namespaces/ns/pods/p:8080/proxy/a b",
        ),
        ("/api/v1/namespaces/ns/configmaps/a...b", "/api/v1/namespaces/ns/configmaps/a...b"),
    ],
)
def test_safe_paths_are_decoded_once_as_the_api_server_does(raw: str, decoded: str) -> None:
    assert decoded_path(raw) == decoded


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("/api/v1/namespaces/a/configmaps/..%2f..%2fb%2fsecrets%2fx", "an encoded slash"),
        ("/api/v1/namespaces/a/configmaps/..%2F..%2Fb%2Fsecrets%2Fx", "an encoded slash"),
        ("/api/v1/namespaces/a/configmaps/x%252fy", "an encoded slash"),
        ("/api/v1/namespaces/a/configmaps/x%25252Fy", "an encoded slash"),
        ("/api/v1/namespaces/a/configmaps/../../b/secrets/x", "a dot segment '..'"),
        ("/api/v1/namespaces/a/configmaps/./x", "a dot segment '.'"),
        ("/api/v1/namespaces/a/configmaps/%2e%2e/x", "a dot segment '%2e%2e' (percent-encoded)"),
        ("/api/v1/namespaces/a/configmaps/%2E./x", "a dot segment"),
        ("/api/v1/namespaces/a/configmaps/%252e%252e/x", "a dot segment"),
        ("/api/v1/namespaces/a/configmaps/x%5cy", "an encoded backslash"),
        ("/api/v1/namespaces/a/configmaps/x%255Cy", "an encoded backslash"),
        ("/api/v1/namespaces/a/configmaps/x\\y", "a backslash"),
        ("/api/v1//namespaces/a/configmaps", "an empty path segment"),
        ("/api/v1/x%252525252e", "layers of %-encoding"),
        ("api/v1/configmaps", "must start with '/'"),
    ],
)
def test_paths_two_readers_could_read_differently_are_refused(raw: str, problem: str) -> None:
    with pytest.raises(UnsafePathError) as error:
        decoded_path(raw)
    assert problem in str(error.value)
