"""A run cannot make the proxy forward another resource than the one it
reasoned about (issue 18, item 5).

The proxy decides from a request's path what it touches: whether a write gets
the owner's mark, whether a read is answered from the operator's cache. A path
with dot segments or encoded slashes reads as one resource to the proxy and
as another once decoded and normalised on the way to the API server; and
`Impersonate-*` headers would be forwarded to the server but ignored by the
cache. The attacks below come from a run's own (valid) token, through the
proxy in-process, against the real API server.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes import client
from proxy_run import Run, proxy_for_a_run

from ansible_operator.cluster import Cluster
from ansible_operator.kube.config import load_config

pytestmark = pytest.mark.cluster

SECRET_VALUE = "never-through-a-configmap-path"


@pytest.fixture
async def run(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> AsyncIterator[Run]:
    client.CoreV1Api(kube_api).create_namespaced_secret(
        kube_namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="x"),
            data={"token": base64.b64encode(SECRET_VALUE.encode()).decode()},
        ),
    )
    async with proxy_for_a_run(load_config(kube_cluster.kubeconfig), kube_namespace) as run:
        yield run


def assert_refused(status: int, body: Any, problem: str) -> None:
    assert status == 400, body
    assert body["kind"] == "Status" and body["reason"] == "BadRequest"
    assert problem in body["message"]
    assert SECRET_VALUE not in json.dumps(body)


@pytest.mark.parametrize(
    ("disguise", "problem"),
    [
        ("..%2f..%2f{ns}%2fsecrets%2fx", "an encoded slash"),  # the example
        ("..%2F..%2F{ns}%2Fsecrets%2Fx", "an encoded slash"),
        ("../../{ns}/secrets/x", "a dot segment"),
        ("%2e%2e/%2e%2e/{ns}/secrets/x", "a dot segment"),
        ("%252e%252e/%252e%252e/{ns}/secrets/x", "a dot segment"),  # double-encoded
        ("..%5c..%5c{ns}%5csecrets%5cx", "an encoded backslash"),
    ],
)
async def test_a_configmap_path_cannot_read_a_secret(run: Run, disguise: str, problem: str) -> None:
    path = f"/api/v1/namespaces/{run.namespace}/configmaps/" + disguise.format(ns=run.namespace)
    status, _, body = await run.send("GET", path)
    assert_refused(status, body, problem)


async def test_a_create_disguised_as_a_subresource_write_is_refused(
    run: Run, kube_api: client.ApiClient
) -> None:
    # The proxy would see a write to a subresource of configmap "x" (no owner
    # mark); the server a plain create of a ConfigMap, unowned.
    path = f"/api/v1/namespaces/{run.namespace}/configmaps/x/..%2f..%2fconfigmaps"
    status, _, body = await run.send("POST", path, {"metadata": {"name": "unowned"}})
    assert_refused(status, body, "an encoded slash")
    with pytest.raises(client.ApiException) as error:
        client.CoreV1Api(kube_api).read_namespaced_config_map("unowned", run.namespace)
    assert error.value.status == 404


async def test_a_sound_path_still_reaches_the_same_resource(run: Run) -> None:
    # Percent-encoded letters are decoded once, as the API server does.
    status, _, body = await run.send(
        "GET", f"/api/v1/namespaces/{run.namespace}/config%6Daps/owner"
    )
    assert status == 200 and body["kind"] == "ConfigMap" and body["metadata"]["name"] == "owner"


@pytest.mark.parametrize(
    ("header", "resource"),
    [
        ("Impersonate-User", "configmaps/owner"),  # a cached kind: the cache would ignore it
        ("Impersonate-Group", "secrets/x"),  # forwarded to the server
        ("impersonate-extra-scopes", "secrets"),
    ],
)
async def test_impersonation_is_refused_not_forwarded_nor_ignored(
    run: Run, header: str, resource: str
) -> None:
    path = f"/api/v1/namespaces/{run.namespace}/{resource}"
    status, headers, body = await run.send("GET", path, headers={header: "system:anonymous"})
    assert status == 403, body
    assert "X-Cache" not in headers
    assert body["kind"] == "Status" and body["reason"] == "Forbidden"
    assert "does not forward impersonation" in body["message"] and header in body["message"]
