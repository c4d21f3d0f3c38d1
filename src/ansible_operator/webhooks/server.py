"""The HTTPS server the API server sends AdmissionReviews to: one path per webhook.

`POST /mutate/<name>` or `/validate/<name>` takes an `admission.k8s.io/v1` AdmissionReview
and answers one. A body that is no review is a 400 naming the problem; a path of no webhook,
a 404. The server keeps the limits of every server of the operator (http_limits.py).
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from ansible_operator.http_limits import GuardedAppRunner
from ansible_operator.webhook_entries import Webhook
from ansible_operator.webhooks.review import AdmissionRequest, ReviewError, parse_review

log = logging.getLogger("ansible_operator.webhooks")

# Two objects of the API server's largest (3 MiB, with an old one for UPDATE), and room.
MAX_BODY = 16 * 2**20
Admit = Callable[[Webhook, AdmissionRequest], Awaitable[dict[str, Any]]]


class WebhookServer:
    def __init__(
        self,
        webhooks: Sequence[Webhook],
        admit: Admit,  # the AdmissionReview (response included) for one request
        tls: ssl.SSLContext,
        host: str,
        port: int,
    ) -> None:
        self.webhooks = {webhook.path: webhook for webhook in webhooks}
        self.admit = admit
        self.tls = tls
        self.host = host
        self.port = port
        self.bound: tuple[str, int] | None = None
        self._runner: GuardedAppRunner | None = None

    async def start(self) -> tuple[str, int]:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/{kind:mutate|validate}/{name}", self._handle)
        self._runner = GuardedAppRunner(app, "webhook")
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.bound = sockets[0].getsockname()[:2] if sockets else (self.host, self.port)
        log.info(
            "webhook server listening address=%s webhooks=%s",
            self.bound,
            ",".join(sorted(self.webhooks)),
        )
        return self.bound

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        webhook = self.webhooks.get(request.path)
        if webhook is None:
            return web.Response(status=404, text=f"no webhook is served at {request.path}\n")
        try:
            admission = parse_review(await request.read())
        except ReviewError as error:
            log.warning("webhook=%s refused a request: %s", webhook.name, error)
            return web.Response(status=400, text=f"{error}\n")
        review = await self.admit(webhook, admission)
        return web.Response(body=json.dumps(review).encode(), content_type="application/json")
