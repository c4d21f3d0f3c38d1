"""The HTTPS server the API server sends AdmissionReviews and ConversionReviews to.

`POST /mutate/<name>` or `/validate/<name>` takes an `admission.k8s.io/v1` AdmissionReview
and answers one; `POST /convert/<kind>.<group>` an `apiextensions.k8s.io/v1`
ConversionReview (conversions.py; its own, higher rate per client: a conversion costs no
run). A body that is no review is a 400 (one nested too deep to read included,
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

from ansible_operator.conversion import review as conversion_review
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.webhook_entries import Webhook
from ansible_operator.serving.http_limits import GuardedAppRunner, GuardedSite, ThrottledWarning
from ansible_operator.serving.http_malformed import StrictAppRunner
from ansible_operator.webhooks.admission_limits import PeerRate, SlotsBusy
from ansible_operator.webhooks.conversions import ConversionEndpoint
from ansible_operator.webhooks.review import AdmissionRequest, ReviewError, parse_review

log = logging.getLogger("ansible_operator.webhooks")

# Two objects of the API server's largest (3 MiB, with an old one for UPDATE), and room.
MAX_BODY = 16 * 2**20
# A ConversionReview carries a whole list the API server serves in another version.
CONVERSION_MAX_BODY = 64 * 2**20
# Conversions cost no run: the API server sends one per list and per watch event of a
# version other than the storage one, far more than admission reviews.
CONVERSION_RATE, CONVERSION_BURST = 500.0, 1000
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
        conversions: ConversionEndpoint | None = None,
    ) -> None:
        self.webhooks = {webhook.path: webhook for webhook in webhooks}
        self.conversions = conversions
        self.conversion_rate = PeerRate(CONVERSION_RATE, CONVERSION_BURST)
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
        app = web.Application(
            client_max_size=CONVERSION_MAX_BODY if self.conversions is not None else MAX_BODY
        )
        app.router.add_post("/{kind:mutate|validate}/{name}", self._handle)
        if self.conversions is not None:
            app.router.add_post("/convert/{name}", self._convert)
        self._runner = StrictAppRunner(app, "webhook")
        await self._runner.setup()
        site = GuardedSite(self._runner, self.host, self.port, tls=self.tls)
        await site.start()
        self.bound = site.bound
        log.info(
            "webhook server listening address=%s webhooks=%s",
            self.bound,
            ",".join(
                sorted([*self.webhooks, *(self.conversions.by_path if self.conversions else ())])
            ),
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

    async def _convert(self, request: web.Request) -> web.Response:
        assert self.conversions is not None
        kind = self.conversions.by_path.get(request.path)
        if kind is None:
            return web.Response(status=404, text="no conversion is served at this path\n")
        peer = client_of(request)
        name = f"convert/{kind.declared.kind}.{kind.declared.group}"
        wait = self.conversion_rate.retry_after(peer)
        if wait is not None:
            self.throttled += 1
            self._count_refused_name(name, 429)
            self._throttle_warning.warning(
                "conversion requests refused (429) kind=%s peer=%s refused=%d",
                name,
                peer,
                self.throttled,
            )
            return web.Response(
                status=429,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
                text="too many conversion requests from this client\n",
            )
        try:
            parsed = conversion_review.parse_review(await request.read())
        except (RecursionError, conversion_review.ReviewError) as error:
            self.unreadable += 1
            self._count_refused_name(name, 400)
            self._unreadable_warning.warning(
                "conversion requests refused (400) kind=%s peer=%s because=%r refused=%d",
                name,
                peer,
                str(error)
                if isinstance(error, ReviewError | conversion_review.ReviewError)
                else "it nests too deep",
                self.unreadable,
            )
            return web.Response(status=400, text="not a ConversionReview this webhook can read\n")
        try:
            answer = await self.conversions.answer(kind, parsed, peer)
        except SlotsBusy as busy:
            self.throttled += 1
            self._count_refused_name(name, 429)
            self._throttle_warning.warning(
                "conversion requests refused (429) kind=%s peer=%s because=%r refused=%d",
                name,
                peer,
                str(busy),
                self.throttled,
            )
            return web.Response(
                status=429, headers={"Retry-After": "1"}, text="too many conversion requests\n"
            )
        return web.Response(body=json.dumps(answer).encode(), content_type="application/json")

    def _count_refused_name(self, name: str, status: int) -> None:
        if self.metrics is not None:
            self.metrics.webhook_refused.labels(name, str(status)).inc()

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
