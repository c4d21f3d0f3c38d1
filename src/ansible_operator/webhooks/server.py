"""The HTTPS server the API server sends AdmissionReviews to: one path per webhook.

`POST /mutate/<name>` or `/validate/<name>` takes an `admission.k8s.io/v1` AdmissionReview
and answers one. A body that is no review is a 400 naming the problem (one nested too deep
to read included, never a traceback); a path of no webhook, a 404. A client past its rate,
or whose wait for a run slot is full, gets a 429 at once (admission_limits.py). The server
keeps the limits of every server of the operator (http_limits.py), the TLS handshake
included.
"""

from __future__ import annotations

import json
import logging
import math
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from ansible_operator.project.webhook_entries import Webhook
from ansible_operator.serving.http_limits import GuardedAppRunner, GuardedSite, ThrottledWarning
from ansible_operator.serving.http_malformed import StrictAppRunner
from ansible_operator.webhooks.admission_limits import PeerRate, SlotsBusy
from ansible_operator.webhooks.review import AdmissionRequest, ReviewError, parse_review

log = logging.getLogger("ansible_operator.webhooks")

# Two objects of the API server's largest (3 MiB, with an old one for UPDATE), and room.
MAX_BODY = 16 * 2**20
# The peer's address (as the server saw the connection), for rate limits and fairness.
Admit = Callable[[Webhook, AdmissionRequest, str], Awaitable[dict[str, Any]]]


class WebhookServer:
    def __init__(
        self,
        webhooks: Sequence[Webhook],
        admit: Admit,  # the AdmissionReview (response included) for one request
        tls: ssl.SSLContext,
        host: str,
        port: int,
        rate: PeerRate | None = None,
    ) -> None:
        self.webhooks = {webhook.path: webhook for webhook in webhooks}
        self.admit = admit
        self.tls = tls
        self.host = host
        self.port = port
        self.rate = rate or PeerRate()
        self.bound: tuple[str, int] | None = None
        self.throttled = 0  # requests answered 429
        self._throttle_warning = ThrottledWarning(log)
        self._runner: GuardedAppRunner | None = None

    async def start(self) -> tuple[str, int]:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/{kind:mutate|validate}/{name}", self._handle)
        self._runner = StrictAppRunner(app, "webhook")
        await self._runner.setup()
        site = GuardedSite(self._runner, self.host, self.port, tls=self.tls)
        await site.start()
        self.bound = site.bound
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
        peer = request.remote or "unknown"
        wait = self.rate.retry_after(peer)
        if wait is not None:
            return self._too_many(webhook, peer, f"more than {self.rate.rate:g} a second", wait)
        try:
            admission = parse_review(await request.read())
        except RecursionError:
            # Deeper than Python's JSON decoder goes (the API server allows 10000 levels).
            error = ReviewError("the body is not JSON we can read: it nests too deep")
            log.warning("webhook=%s refused a request: %s", webhook.name, error)
            return web.Response(status=400, text=f"{error}\n")
        except ReviewError as error:
            log.warning("webhook=%s refused a request: %s", webhook.name, error)
            return web.Response(status=400, text=f"{error}\n")
        try:
            review = await self.admit(webhook, admission, peer)
        except SlotsBusy as busy:
            return self._too_many(webhook, peer, str(busy), 1.0)
        return web.Response(body=json.dumps(review).encode(), content_type="application/json")

    def _too_many(self, webhook: Webhook, peer: str, why: str, retry: float) -> web.Response:
        self.throttled += 1
        self._throttle_warning.warning(
            "webhook requests refused (429) webhook=%s peer=%s because=%r refused=%d",
            webhook.name,
            peer,
            why,
            self.throttled,
        )
        return web.Response(
            status=429,
            headers={"Retry-After": str(max(1, math.ceil(retry)))},
            text=f"too many admission requests from {peer}: {why}\n",
        )
