"""A run cannot choose who the API server takes it for (issue 25, item 6).

An API server with request-header authentication (aggregation's front proxy:
--requestheader-client-ca-file) takes `X-Remote-User`, `X-Remote-Group`,
`X-Remote-Uid` and `X-Remote-Extra-*` for the user's identity from any client
whose certificate that CA signed, which the operator's own client certificate
may be. The proxy forwarded them. A run asks the API server who it is (a
SelfSubjectReview) through the proxy with such a header: the proxy refuses
it, and without it the answer names the operator's own identity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes import client
from proxy_run import Run, proxy_for_a_run

from ansible_operator.cluster import Cluster
from ansible_operator.kube.config import load_config

pytestmark = pytest.mark.cluster

WHO_AM_I = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


@pytest.fixture
async def run(kube_cluster: Cluster, kube_namespace: str) -> AsyncIterator[Run]:
    async with proxy_for_a_run(load_config(kube_cluster.kubeconfig), kube_namespace) as run:
        yield run


def operator_identity(api: client.ApiClient) -> str:
    review: Any = client.AuthenticationV1Api(api).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    return str(review.status.user_info.username)


async def test_a_run_is_the_operator_to_the_api_server(
    run: Run, kube_api: client.ApiClient
) -> None:
    status, _, review = await run.send("POST", WHO_AM_I, REVIEW)
    assert status == 201, review
    assert review["status"]["userInfo"]["username"] == operator_identity(kube_api)


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("X-Remote-User", "system:admin"),
        ("x-remote-user", "system:admin"),
        ("X-REMOTE-GROUP", "system:masters"),
        ("X-Remote-Uid", "0"),
        ("X-Remote-Extra-Scopes", "everything"),
        ("Impersonate-Uid", "0"),
    ],
)
async def test_a_run_cannot_name_another_identity_by_header(
    run: Run, header: str, value: str
) -> None:
    status, _, body = await run.send("POST", WHO_AM_I, REVIEW, headers={header: value})
    assert status == 403, body
    assert body["kind"] == "Status" and body["reason"] == "Forbidden"
    # The proxy's refusal, naming the header: the request never reached the API server.
    assert "ansible-operator proxy" in body["message"] and header in body["message"]
    assert "userInfo" not in str(body)
