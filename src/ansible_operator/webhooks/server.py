"""The HTTPS server the API server sends AdmissionReviews to: one path per webhook.

`POST /mutate/<name>` or `/validate/<name>` takes an `admission.k8s.io/v1` AdmissionReview
and answers one. A body that is no review is a 400 (one nested too deep to read included,
never a traceback); a path of no webhook, a 404; their bodies say no more (the caller may
be anyone: what was wrong goes to the operator's log). A client past its rate, or whose
wait for a run slot is full, gets a 429 at once (admission_limits.py); a client is its
certificate's subject when the handshake requires one, else its address (`client_of`). The server
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

from ansible_operator.observability.metrics import Metrics
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
        *,
        metrics: Metrics | None = None,
    ) -> None:
        self.webhooks = {webhook.path: webhook for webhook in webhooks}
        self.admit = admit
        self.tls = tls
        self.host = host
        self.port = port
        self.rate = rate or PeerRate()
        self.bound: tuple[str, int] | None = None
        self.throttled = 0  # requests answered 429
        self.metrics = metrics
        # Refusals are summarised: a line per interval with running counts, whatever
        # the number refused (a flood must not write the log's size).
        self._throttle_warning = ThrottledWarning(log)
        self._unreadable_warning = ThrottledWarning(log)
        self.unreadable = 0  # requests answered 400
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
            return web.Response(status=404, text="no webhook is served at this path\n")
        peer = client_of(request)
        wait = self.rate.retry_after(peer)
        if wait is not None:
            return self._too_many(webhook, peer, f"more than {self.rate.rate:g} a second", wait)
        try:
            admission = parse_review(await request.read())
        except RecursionError:
            # Deeper than Python's JSON decoder goes (the API server allows 10000 levels).
            return self._unreadable(
                webhook, peer, ReviewError("the body is not JSON we can read: it nests too deep")
            )
        except ReviewError as error:
            return self._unreadable(webhook, peer, error)
        try:
            review = await self.admit(webhook, admission, peer)
        except SlotsBusy as busy:
            return self._too_many(webhook, peer, str(busy), 1.0)
        return web.Response(body=json.dumps(review).encode(), content_type="application/json")

    def _unreadable(self, webhook: Webhook, peer: str, error: ReviewError) -> web.Response:
        self.unreadable += 1
        self._count_refused(webhook, 400)
        self._unreadable_warning.warning(
            "webhook requests refused (400) webhook=%s peer=%s because=%r refused=%d",
            webhook.name,
            peer,
            str(error),
            self.unreadable,
        )
        # What was wrong is for the operator's log: the caller may be anyone.
        return web.Response(status=400, text="not an AdmissionReview this webhook can read\n")

    def _count_refused(self, webhook: Webhook, status: int) -> None:
        if self.metrics is not None:
            self.metrics.webhook_refused.labels(webhook.name, str(status)).inc()

    def _too_many(self, webhook: Webhook, peer: str, why: str, retry: float) -> web.Response:
        self.throttled += 1
        self._count_refused(webhook, 429)
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
            text="too many admission requests from this client\n",
        )


def client_of(request: web.Request) -> str:
    """Who sends `request`, for rate limits and fair slots: with `--webhook-client-ca`,
    the subject of the certificate the handshake verified (the API server is itself
    wherever it connects from, and no other client shares its share by sharing its
    address); else the address the connection comes from."""
    transport = request.transport
    certificate = transport.get_extra_info("peercert") if transport is not None else None
    if certificate:
        subject = dict(pair for name in certificate.get("subject", ()) for pair in name)
        if subject.get("commonName"):
            return f"certificate CN={subject['commonName']}"
    return request.remote or "unknown"
