"""A client flooding the webhook port, on a real HTTPS server on loopback, while
another (the API server) must still be answered: its 429s come quickly instead
of queueing behind the real requests. Seconds of load, so not a unit test; the
rest of the port's limits are tests/unit/test_webhook_limits.py.

Clients pick their source address in 127.0.0.0/8, so the server sees two peers."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ansible_operator.project.webhook_entries import Webhook, WebhookRule
from ansible_operator.webhooks import tls
from ansible_operator.webhooks.admission_limits import FairSlots
from ansible_operator.webhooks.review import AdmissionRequest, review_answer
from ansible_operator.webhooks.server import WebhookServer

API_SERVER, ATTACKER = "127.0.0.1", "127.0.0.2"
WEBHOOK = Webhook(
    name="check.example.com",
    type="validating",
    rules=(WebhookRule(("",), ("v1",), ("configmaps",), ("CREATE",)),),
    role=Path("/roles/check"),
    playbook=None,
)


def review_body(uid: str) -> bytes:
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "namespace": "default",
        "operation": "CREATE",
        "object": {"metadata": {"name": "c"}},
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> tls.ServingTls:
    directory = tmp_path_factory.mktemp("webhook-tls")
    return asyncio.run(tls.operator_made(None, None, [API_SERVER, "localhost"], directory))


@asynccontextmanager
async def webhook_server(
    serving: tls.ServingTls, slots: FairSlots, run_seconds: float
) -> AsyncIterator[tuple[WebhookServer, str]]:
    """A webhook server whose 'run' holds a fair slot for `run_seconds`, as runs.py does."""

    async def admit(webhook: Webhook, request: AdmissionRequest, peer: str) -> dict[str, Any]:
        async with slots.reserve(peer):
            await asyncio.sleep(run_seconds)
        return review_answer({"uid": request.uid, "allowed": True})

    server = WebhookServer([WEBHOOK], admit, serving.context, "127.0.0.1", 0)
    host, port = await server.start()
    try:
        yield server, f"https://{host}:{port}{WEBHOOK.path}"
    finally:
        await server.stop()


def session_from(
    source: str, serving: tls.ServingTls, timeout: float = 30.0
) -> aiohttp.ClientSession:
    assert serving.ca_bundle is not None
    context = ssl.create_default_context(cadata=serving.ca_bundle.decode())
    connector = aiohttp.TCPConnector(ssl=context, local_addr=(source, 0))
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout))


async def test_a_flooding_client_gets_429s_while_the_api_server_is_still_answered(
    serving: tls.ServingTls,
) -> None:
    slots = FairSlots(2)
    async with webhook_server(serving, slots, run_seconds=0.3) as (server, url):
        statuses: list[int] = []

        async def flood(session: aiohttp.ClientSession) -> None:
            for number in range(40):
                async with session.post(url, data=review_body(f"a-{number}")) as response:
                    statuses.append(response.status)

        async with (
            session_from(ATTACKER, serving) as attacker,
            # The API server gives a webhook 10s (timeoutSeconds), then applies the policy.
            session_from(API_SERVER, serving, timeout=10.0) as api_server,
        ):
            flooding = [asyncio.create_task(flood(attacker)) for _ in range(24)]
            await asyncio.sleep(0)
            answers = []
            for number in range(6):
                async with api_server.post(url, data=review_body(f"real-{number}")) as response:
                    assert response.status == 200, await response.text()
                    answers.append((await response.json())["response"])
            await asyncio.gather(*flooding)
        assert [answer["uid"] for answer in answers] == [f"real-{n}" for n in range(6)]
        assert all(answer["allowed"] for answer in answers)
        # The flood was turned away quickly rather than queued behind the real requests.
        assert statuses.count(429) > 0
        assert server.throttled == statuses.count(429)
