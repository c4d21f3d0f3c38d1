"""The metrics endpoint served as controller-runtime serves it.

`--metrics-secure`: HTTPS (the given certificate, or a self-signed one made
at start), and every request needs a bearer token that the API server
authenticates (TokenReview) and authorizes for `get` on the non-resource URL
asked (SubjectAccessReview): no token or an unknown one is 401, a token not
allowed is 403. `--metrics-require-rbac` asks the same of plain HTTP clients.
A Prometheus ServiceAccount needs a ClusterRole with
`nonResourceURLs: ["/metrics"], verbs: ["get"]`; the operator's own account
needs `create` on `tokenreviews` and `subjectaccessreviews`.

Unsecured, the endpoint binds loopback unless told otherwise: what it shows
(object names, namespaces, failure counts) is for the pod, not the network.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.settings import Settings

log = logging.getLogger("ansible_operator.metrics")

SECURE_ADDRESS = ":8443"
LOOPBACK_ADDRESS = "127.0.0.1:8443"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ALLOWED_TTL = 60.0  # seconds an answer of the API server is reused
DENIED_TTL = 10.0
MAX_CACHED = 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def metrics_address(settings: Settings) -> str:
    if settings.metrics.bind_address is not None:
        return settings.metrics.bind_address
    return SECURE_ADDRESS if settings.metrics.secure else LOOPBACK_ADDRESS


def needs_auth(settings: Settings) -> bool:
    return settings.metrics.secure or settings.metrics.require_rbac


def server_tls(settings: Settings, scratch: Path) -> ssl.SSLContext | None:
    """The metrics server's TLS: the certificate in --metrics-cert-path, or a
    self-signed one (as controller-runtime makes when given none)."""
    if not settings.metrics.secure:
        return None
    if settings.metrics.cert_path is not None:
        cert = settings.metrics.cert_path / settings.metrics.cert_name
        key = settings.metrics.cert_path / settings.metrics.cert_key
    else:
        # Only here: cryptography costs every other operator 30 ms of start-up.
        from ansible_operator.serving.pki import create_ca, issue_serving_cert

        directory = scratch / "metrics-tls"
        pair = issue_serving_cert(create_ca(directory, "ansible-operator-metrics"), directory)
        cert, key = pair.cert_path, pair.key_path
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise SystemExit(f"--metrics-cert-path: cannot load {cert} and {key}: {error}") from None
    return context


@dataclass
class _Answer:
    value: Any
    expires: float


class MetricsAuthorizer:
    """Who may read metrics, as the API server says (cached briefly)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._users: dict[str, _Answer] = {}
        self._access: dict[tuple[str, str, str], _Answer] = {}

    def middleware(self) -> Any:
        @web.middleware
        async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
            denied = await self.check(request)
            return denied if denied is not None else await handler(request)

        return authorize

    async def check(self, request: web.Request) -> web.Response | None:
        """None if the request may go on, else the answer that refuses it."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return web.Response(status=401, text="Unauthorized: a bearer token is required\n")
        try:
            user = await self._authenticate(token.strip())
            if user is None:
                return web.Response(status=401, text="Unauthorized\n")
            verb = request.method.lower()
            if not await self._authorize(user, request.path, verb):
                name = user.get("username", "?")
                refusal = f"Forbidden: {name} may not {verb} {request.path} (RBAC nonResourceURLs)"
                return web.Response(status=403, text=refusal + "\n")
        except (ApiError, OSError) as error:
            log.warning("metrics client could not be checked: %s", error)
            return web.Response(status=500, text="Internal Server Error: authorization failed\n")
        return None

    async def _authenticate(self, token: str) -> dict[str, Any] | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = _fresh(self._users, key)
        if cached is not None:
            return cached.value
        review = await self.api.request(
            "POST",
            TOKEN_REVIEWS,
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        user = status.get("user") if status.get("authenticated") else None
        _remember(self._users, key, user, ALLOWED_TTL if user else DENIED_TTL)
        return user

    async def _authorize(self, user: dict[str, Any], path: str, verb: str) -> bool:
        key = (str(user.get("uid") or user.get("username")), path, verb)
        cached = _fresh(self._access, key)
        if cached is not None:
            return bool(cached.value)
        spec: dict[str, Any] = {
            "user": user.get("username"),
            "groups": user.get("groups") or [],
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = await self.api.request(
            "POST",
            ACCESS_REVIEWS,
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        _remember(self._access, key, allowed, ALLOWED_TTL if allowed else DENIED_TTL)
        return allowed


def _fresh(cache: dict[Any, _Answer], key: Any) -> _Answer | None:
    answer = cache.get(key)
    if answer is None or answer.expires < time.monotonic():
        return None
    return answer


def _remember(cache: dict[Any, _Answer], key: Any, value: Any, ttl: float) -> None:
    if len(cache) >= MAX_CACHED:  # tokens are many, reviews cheap: start over
        cache.clear()
    cache[key] = _Answer(value, time.monotonic() + ttl)
