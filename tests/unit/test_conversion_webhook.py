"""The conversion endpoint of the webhook port, on a real HTTPS server on loopback, and the
CRD stanza the operator keeps: what the API server is sent, what it is answered."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.conversion.converter import Converter
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.watches import load_watches_file
from ansible_operator.testing.metrics import metric_value
from ansible_operator.webhooks import tls
from ansible_operator.webhooks.configurations import Endpoint
from ansible_operator.webhooks.conversion_runs import objects_from_event
from ansible_operator.webhooks.conversions import ConversionEndpoint
from ansible_operator.webhooks.crd_conversion import (
    LAST_APPLIED,
    Followed,
    _to_put_back,
    in_sync,
    wanted,
)
from ansible_operator.webhooks.server import WebhookServer
from webhook_port import API_SERVER, serving_tls, session_from

ROOT = Path(__file__).resolve().parents[2]
[HARBOR] = [
    c
    for c in load_watches_file(ROOT / "watches.yaml", env={}, cwd=ROOT).conversions
    if c.kind == "HarborCluster"
]
PATH = "/convert/harborcluster.goharbor.io"
SERVICE = Endpoint(service=("ops", "ops-webhook-service", 443))


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> tls.ServingTls:
    return serving_tls(tmp_path_factory.mktemp("webhook-tls"))


def review(objects: list[dict[str, Any]], desired: str = "goharbor.io/v1alpha3") -> bytes:
    return json.dumps(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "r-1", "desiredAPIVersion": desired, "objects": objects},
        }
    ).encode()


HUB_OBJECT = {
    "apiVersion": "goharbor.io/v1beta1",
    "kind": "HarborCluster",
    "metadata": {"name": "reg", "namespace": "team", "uid": "u-1"},
    "spec": {"version": "2.10.0", "externalURL": "https://harbor.example.com"},
}


async def post(serving: tls.ServingTls, port: int, path: str, body: bytes) -> tuple[int, Any]:
    async with (
        session_from(API_SERVER, serving) as session,
        session.post(f"https://127.0.0.1:{port}{path}", data=body) as answer,
    ):
        text = await answer.text()
        try:
            return answer.status, json.loads(text)
        except ValueError:
            return answer.status, text


async def test_a_review_is_answered_in_the_version_asked_and_counted(
    serving: tls.ServingTls,
) -> None:
    kind = Followed(HARBOR, Converter(HARBOR), seen=True)
    metrics = Metrics()
    server = WebhookServer(
        [], None, serving.context, "127.0.0.1", 0,  # type: ignore[arg-type]
        metrics=metrics, conversions=ConversionEndpoint([kind], metrics=metrics),
    )  # fmt: skip
    _, port = await server.start()
    try:
        status, answer = await post(serving, port, PATH, review([HUB_OBJECT]))
        assert status == 200
        response = answer["response"]
        assert response["uid"] == "r-1" and response["result"] == {"status": "Success"}
        [converted] = response["convertedObjects"]
        assert converted["apiVersion"] == "goharbor.io/v1alpha3"
        assert converted["spec"]["expose"] == {"scheme": "https", "host": "harbor.example.com"}
        exposition = metrics.exposition().decode()
        counted = {"kind": "HarborCluster.goharbor.io", "version": "v1alpha3"}
        assert (
            metric_value(
                exposition,
                "ansible_operator_conversion_reviews_total",
                **counted,
                result="succeeded",
            )
            == 1
        )

        # Not our kind's version: refused, naming the entry, never a traceback.
        stray = {**HUB_OBJECT, "apiVersion": "goharbor.io/v9"}
        _, refused = await post(serving, port, PATH, review([stray]))
        result = refused["response"]["result"]
        assert result["status"] == "Failure"
        assert "(conversion of HarborCluster.goharbor.io)" in result["message"]
        assert "no conversion is declared for version v9" in result["message"]

        # No review, or no such path: a generic answer (the caller may be anyone).
        assert await post(serving, port, PATH, b"{not json") == (
            400,
            "not a ConversionReview this webhook can read\n",
        )
        assert (await post(serving, port, "/convert/other.example.com", review([])))[0] == 404
    finally:
        await server.stop()


async def test_a_review_before_the_crd_was_read_is_refused_as_not_ready(
    serving: tls.ServingTls,
) -> None:
    kind = Followed(HARBOR, Converter(HARBOR))  # no CRD read yet: no schemas
    server = WebhookServer(
        [], None, serving.context, "127.0.0.1", 0,  # type: ignore[arg-type]
        conversions=ConversionEndpoint([kind]),
    )  # fmt: skip
    _, port = await server.start()
    try:
        _, answer = await post(serving, port, PATH, review([HUB_OBJECT]))
        result = answer["response"]["result"]
        assert result["status"] == "Failure"
        assert "has not read CRD" in result["message"] and "try again" in result["message"]
    finally:
        await server.stop()


def test_the_stanza_sends_the_crd_to_our_endpoint_with_our_bundle() -> None:
    stanza = wanted(HARBOR, SERVICE, b"CA")
    assert stanza == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "service": {
                    "namespace": "ops",
                    "name": "ops-webhook-service",
                    "path": PATH,
                    "port": 443,
                },
                "caBundle": base64.b64encode(b"CA").decode(),
            },
            "conversionReviewVersions": ["v1"],
        },
    }
    crd = {"spec": {"conversion": stanza}}
    assert in_sync(crd, stanza)
    assert not in_sync(crd, wanted(HARBOR, SERVICE, b"renewed CA"))
    assert not in_sync({"spec": {"conversion": {"strategy": "None"}}}, stanza)
    url = wanted(HARBOR, Endpoint(url="https://127.0.0.1:9443"), b"CA")
    assert url["webhook"]["clientConfig"]["url"] == f"https://127.0.0.1:9443{PATH}"
    assert not in_sync(crd, url)


def test_a_loopback_operator_puts_back_the_manifests_stanza_not_another_loopback_one() -> None:
    manifest = wanted(HARBOR, SERVICE, None)
    stale = wanted(HARBOR, Endpoint(url="https://127.0.0.1:41234"), b"old")
    crd = {
        "metadata": {"annotations": {LAST_APPLIED: json.dumps({"spec": {"conversion": manifest}})}}
    }
    assert _to_put_back(Followed(HARBOR, Converter(HARBOR), crd=crd, found=manifest)) == manifest
    assert _to_put_back(Followed(HARBOR, Converter(HARBOR), crd=crd, found=stale)) == manifest
    assert _to_put_back(Followed(HARBOR, Converter(HARBOR), crd={}, found=stale)) == {}


@pytest.mark.parametrize(
    ("event", "objects"),
    [
        (
            {
                "event": "runner_on_ok",
                "event_data": {
                    "task_action": "operator_sdk.util.conversion_response",
                    "res": {"conversion_response": {"objects": [{"a": 1}]}},
                },
            },
            [{"a": 1}],
        ),
        ({"event": "runner_on_failed", "event_data": {}}, None),
        (
            {
                "event": "runner_on_ok",
                "event_data": {"task_action": "debug", "res": {"conversion_response": {}}},
            },
            None,
        ),
    ],
)
def test_the_answer_is_the_conversion_response_tasks(
    event: dict[str, Any], objects: list[Any] | None
) -> None:
    assert objects_from_event(event) == objects
