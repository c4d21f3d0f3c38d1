"""A webhook server on loopback HTTPS, and clients that pick their source address in
127.0.0.0/8 so the server sees two peers: the API server and an attacker. Shared by
the webhook port's unit tests (tests/unit/test_webhook_limits.py) and its flood test
(tests/security/test_webhook_flood.py)."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from ansible_operator.project.webhook_entries import Webhook, WebhookRule
from ansible_operator.webhooks import tls
from ansible_operator.webhooks.admission_limits import FairSlots, PeerRate
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


def review_body(uid: str = "u-1", obj: Any = None) -> bytes:
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "namespace": "default",
        "operation": "CREATE",
        "object": obj if obj is not None else {"metadata": {"name": "c"}},
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def serving_tls(directory: Path) -> tls.ServingTls:
    """A CA and a serving certificate for the API server's address, made in `directory`."""
    return asyncio.run(tls.operator_made(None, None, [API_SERVER, "localhost"], directory))


def client_context(serving: tls.ServingTls) -> ssl.SSLContext:
    assert serving.ca_bundle is not None
    return ssl.create_default_context(cadata=serving.ca_bundle.decode())


@asynccontextmanager
async def webhook_server(
    serving: tls.ServingTls, slots: FairSlots, run_seconds: float, rate: PeerRate | None = None
) -> AsyncIterator[tuple[WebhookServer, str]]:
    """A webhook server whose 'run' holds a fair slot for `run_seconds`, as runs.py does."""

    async def admit(webhook: Webhook, request: AdmissionRequest, peer: str) -> dict[str, Any]:
        async with slots.reserve(peer):
            await asyncio.sleep(run_seconds)
        return review_answer({"uid": request.uid, "allowed": True})

    server = WebhookServer([WEBHOOK], admit, serving.context, "127.0.0.1", 0, rate=rate)
    host, port = await server.start()
    try:
        yield server, f"https://{host}:{port}{WEBHOOK.path}"
    finally:
        await server.stop()


def session_from(
    source: str, serving: tls.ServingTls, timeout: float = 30.0, cert: Any = None
) -> aiohttp.ClientSession:
    """A client from address `source`, presenting `cert` (pki's issued certificate) if any."""
    context = client_context(serving)
    if cert is not None:
        context.load_cert_chain(cert.cert_path, cert.key_path)
    connector = aiohttp.TCPConnector(ssl=context, local_addr=(source, 0))
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout))
