"""The Kubernetes API proxy every run talks through.

- Loopback only; each run authenticates with its own secret token (from its
  kubeconfig), which names the run's owner. No token, a forged one, or one of
  a finished run: 401.
- Writes (POST, PUT, server-side apply, patches that would drop our
  ownerReference) get the owner marked (see ownership.py), then the dependent
  kind gets a watch so drift re-triggers the owner.
- GET and LIST of kinds the operator caches are answered from the cache
  (`X-Cache: HIT`); everything else is forwarded with the operator's own
  credentials, streamed (watches, large reads), buffered (writes, whose
  answers feed the cache and the dependent watches) or tunnelled (exec,
  attach, port-forward).
- A run acts as the operator: headers that would choose another identity
  (`Impersonate-*`, and the `X-Remote-*` of request-header authentication,
  which an API server trusting the operator's client certificate as a front
  proxy would honour) are refused, never forwarded.
- A run's streams (watches, long reads, tunnels) end when its grant is
  revoked: nothing it opened outlives the run.
- Errors of the proxy's own are Kubernetes Status bodies, as the API server's are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import yaml
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from ansible_operator.http_malformed import StrictAppRunner, malformed
from ansible_operator.kube.client import ApiError
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.discovery import RestMapper, UnknownResource
from ansible_operator.kube.kubeconfig import build_kubeconfig
from ansible_operator.kube.selectors import SelectorError
from ansible_operator.kube.types import Owner, Resource
from ansible_operator.kube.upstreams import Upstream, Upstreams
from ansible_operator.proxy import ownership
from ansible_operator.proxy.paths import (
    ResourcePath,
    UnsafePathError,
    decoded_path,
    parse_resource_path,
)
from ansible_operator.runner.access import RunAccess

log = logging.getLogger("ansible_operator.proxy")

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "authorization",
        "content-length",
    }
)
# Not forwarded either: aiohttp hands us the request's body decoded.
NOT_FORWARDED = HOP_BY_HOP | {"content-encoding"}
# Headers that make the API server take a request for another user's:
# impersonation, and request-header authentication (--requestheader-username-headers
# and friends: X-Remote-User, X-Remote-Group, X-Remote-Uid, X-Remote-Extra-*).
IDENTITY_HEADER_PREFIXES = ("impersonate-", "x-remote-")
APPLY_PATCH = "application/apply-patch+yaml"
BUFFERED_BODY = 1 << 20  # larger GET answers (big LISTs) are streamed through
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
WRITES = ("POST", "PUT", "PATCH", "DELETE")
READS = ("GET", "HEAD", "OPTIONS")
UNOWNED_REMEMBERED = 10_000  # (owner, object) pairs already logged as left unowned


class ObjectCache(Protocol):
    """Reads the operator already caches (informers), by resource (kube/cache.py)."""

    def view(self, resource: Resource, namespace: str | None) -> CachedKind | None: ...


class CachedKind(Protocol):
    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def list(
        self, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> list[dict[str, Any]]: ...

    @property
    def resource_version(self) -> str: ...

    def remember(self, obj: dict[str, Any], *, deleted: bool = False) -> None: ...


# A run of this owner wrote an object of this kind (the object written, when
# the API server returned it).
WriteListener = Callable[[Resource, Owner, dict[str, Any] | None], None]
# Whether a run of this owner may read this kind from the cache.
CachePolicy = Callable[[Resource, Owner], bool]


@dataclass
class Grant:
    owner: Owner
    # False: the run may only read (an admission webhook without side effects).
    writes: bool = True
    # False: the run owns nothing it writes, follows no dependent, reads past the
    # cache (an admission run, whose answer must not rest on a watch's state).
    owns: bool = True
    # Set when the run ends: the streams it opened close (until_revoked).
    revoked: asyncio.Event = field(default_factory=asyncio.Event)


def names_an_identity(header: str) -> bool:
    return header.lower().startswith(IDENTITY_HEADER_PREFIXES)


def forwarded_headers(request: web.Request) -> dict[str, str]:
    """The run's request headers the API server gets (with our credentials added)."""
    return {
        key: value
        for key, value in request.headers.items()
        if key.lower() not in NOT_FORWARDED and not names_an_identity(key)
    }


async def until_revoked(grant: Grant, relay: Coroutine[Any, Any, None]) -> None:
    """Run `relay` (the copying of a stream) to its end, or until the run's
    grant is revoked: a watch must not keep feeding a run that has ended."""
    relaying = asyncio.ensure_future(relay)
    revoked = asyncio.ensure_future(grant.revoked.wait())
    try:
        await asyncio.wait((relaying, revoked), return_when=asyncio.FIRST_COMPLETED)
    finally:
        revoked.cancel()
        if not relaying.done():
            relaying.cancel()
            await asyncio.wait((relaying,))
    if not relaying.cancelled():
        relaying.result()  # the copy's own error, as if it had run here


def relayed_as_it_comes(
    method: str, target: ResourcePath | None, watching: bool, length: int | None
) -> bool:
    """Whether the API server's answer is streamed through rather than buffered:
    watches, and reads too large (or of unknown size) to hold. The answer to a
    write is always buffered: the cache and the dependent watches read it."""
    if watching:
        return True
    readonly = method == "GET" or target is None
    return readonly and (length is None or length > BUFFERED_BODY)


async def copy_body(upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)


async def relay_frames(source: Any, sink: Any) -> None:
    """One direction of a WebSocket tunnel, frame by frame, until either end closes."""
    async for message in source:
        if message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        else:
            break
    await sink.close()


async def relay_tunnel(upstream: Any, downstream: Any) -> None:
    await asyncio.gather(
        relay_frames(upstream, downstream),
        relay_frames(downstream, upstream),
        return_exceptions=True,
    )


def status_response(code: int, reason: str, message: str) -> web.Response:
    """An error as the API server gives one: a Kubernetes Status, which
    clients (kubernetes.core, kubectl) show by its message."""
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message,
        },
        status=code,
    )


def identity_refusal(request: web.Request) -> web.Response | None:
    """A 403 for a request that names another identity than the operator's."""
    named = next((key for key in request.headers if names_an_identity(key)), None)
    if named is None:
        return None
    # Cached answers could not honour it, and a run acts as its operator.
    return status_response(
        403,
        "Forbidden",
        f"the ansible-operator proxy does not forward impersonation nor request-header "
        f"identities (header {named}); a run acts as the operator's service account",
    )


async def read_body(request: web.Request) -> bytes | web.Response:
    """The request's whole body, or a 400 naming why it cannot be read (its
    chunking or compression is broken)."""
    if not request.can_read_body:
        return b""
    try:
        return await request.read()
    except web.RequestPayloadError as error:
        problem = malformed(error)
        return status_response(
            400,
            "BadRequest",
            "the ansible-operator proxy cannot read the request's body: "
            f"{problem.message if problem else error}",
        )


class ApiProxy:
    def __init__(
        self,
        config: KubeConfig,
        mapper: RestMapper,
        *,
        cache: ObjectCache | None = None,
        reads_cached: CachePolicy | None = None,
        on_write: WriteListener | None = None,
        inject_owner_ref: bool = True,
        port: int = 8888,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        on_cache_hit: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.mapper = mapper
        self.cache = cache
        self.reads_cached = reads_cached
        self.on_write = on_write
        self.inject_owner_ref = inject_owner_ref
        self.port = port
        self.trace_configs = trace_configs
        self.on_cache_hit = on_cache_hit
        self._grants: dict[str, Grant] = {}
        self._unowned_said: set[tuple[str, str]] = set()
        self._runner: web.AppRunner | None = None
        # Sessions to the API server, following a changed kubeconfig (kube/upstreams.py).
        self._upstreams: Upstreams | None = None
        self.bound_port: int | None = None
        self.stats = {"cache_hits": 0, "forwarded": 0, "injected": 0, "unauthorized": 0}

    # ----- per-run access (the AccessProvider the reconciler uses) -----------
    def grant(self, owner: Owner, *, writes: bool = True, owns: bool = True) -> RunAccess:
        if self.bound_port is None:
            raise RuntimeError("the proxy is not started")
        token = secrets.token_urlsafe(32)
        self._grants[token] = Grant(owner, writes, owns)
        kubeconfig = build_kubeconfig(
            f"http://127.0.0.1:{self.bound_port}",
            name="ansible-operator-proxy",
            token=token,
            namespace=owner.namespace or None,
        )

        def revoke() -> None:
            grant = self._grants.pop(token, None)
            if grant is not None:
                grant.revoked.set()

        return RunAccess(kubeconfig=kubeconfig, revoke=revoke)

    # ----- lifecycle -----------------------------------------------------------
    def _new_session(self, config: KubeConfig) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=config.ssl, limit=64),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            trace_configs=self.trace_configs,
        )

    async def start(self) -> int:
        self._upstreams = Upstreams(self.config, self._new_session)
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = StrictAppRunner(app, "proxy", handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.port
        log.info("api proxy listening address=127.0.0.1:%s", self.bound_port)
        return self.bound_port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._upstreams is not None:
            await self._upstreams.close()

    # ----- request handling ----------------------------------------------------
    def _grant_for(self, request: web.Request) -> Grant | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self._grants.get(token)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        grant = self._grant_for(request)
        if grant is None:
            self.stats["unauthorized"] += 1
            return status_response(
                401,
                "Unauthorized",
                "the ansible-operator proxy serves only the operator's own runs",
            )
        refusal = identity_refusal(request)
        if refusal is not None:
            return refusal
        try:
            # Reasoned about as the API server will read it; forwarded as sent.
            path = decoded_path(request.rel_url.raw_path)
        except UnsafePathError as error:
            log.warning(
                "api proxy refused a path owner=%s path=%r reason=%s",
                grant.owner.describe(),
                request.rel_url.raw_path,
                error,
            )
            return status_response(
                400, "BadRequest", f"the ansible-operator proxy refuses this path: {error}"
            )
        if not grant.writes and (request.method not in READS or request.headers.get("Upgrade")):
            log.warning(
                "api proxy refused a write of a read-only run owner=%s method=%s path=%s",
                grant.owner.describe(),
                request.method,
                path,
            )
            return status_response(
                403,
                "Forbidden",
                f"the ansible-operator proxy refuses {request.method} {path}: this run may only "
                "read (an admission webhook without sideEffects: NoneOnDryRun, or a dry run)",
            )
        if request.headers.get("Upgrade"):
            return await self._tunnel(request, grant)
        target = parse_resource_path(path)
        body = await read_body(request)
        if isinstance(body, web.Response):
            return body
        resource = None
        if target is not None:
            try:
                resource = await self._resource(target)
            except ApiError as error:
                # Without the kind, a write could not be marked as the run's.
                return status_response(
                    503,
                    "ServiceUnavailable",
                    f"the ansible-operator proxy could not look up the kind of {path}: "
                    f"API discovery failed: {error}",
                )
        if target is not None and resource is not None and grant.owns:
            if request.method == "GET":
                cached = self._from_cache(request, target, resource, grant.owner)
                if cached is not None:
                    return cached
            elif request.method in ("POST", "PUT", "PATCH") and target.subresource is None:
                body = await self._mark_ownership(request, target, resource, grant.owner, body)
        response, answer = await self._forward(request, body, target, grant)
        if (
            target is not None
            and resource is not None
            and answer is not None
            and grant.owns
            and request.method in WRITES
            and 200 <= response.status < 300
        ):
            await self._after_write(target, resource, grant.owner, answer, request.method)
        return response

    async def _resource(self, target: ResourcePath) -> Resource | None:
        """The kind `target` names; None when the server does not serve it,
        which the server reports itself when the request is forwarded."""
        try:
            return await self.mapper.resource_for_plural(
                target.group, target.version, target.plural
            )
        except UnknownResource:
            return None

    # ----- cache ----------------------------------------------------------------
    def _cached(self, resource: Resource, namespace: str | None, owner: Owner) -> CachedKind | None:
        if self.cache is None:
            return None
        if self.reads_cached is not None and not self.reads_cached(resource, owner):
            return None
        return self.cache.view(resource, namespace)

    def _from_cache(
        self, request: web.Request, target: ResourcePath, resource: Resource, owner: Owner
    ) -> web.Response | None:
        if self.cache is None or target.subresource is not None:
            return None
        query = request.query
        if query.get("watch") in ("1", "true") or query.get("resourceVersion") not in (
            None,
            "",
            "0",
        ):
            return None
        kind = self._cached(resource, target.namespace if resource.namespaced else None, owner)
        if kind is None:
            return None
        if target.name is not None:
            obj = kind.get(target.namespace if resource.namespaced else None, target.name)
            if obj is None:
                return None  # maybe just created: let the server answer
            body: dict[str, Any] = {
                **obj,
                "apiVersion": resource.api_version,
                "kind": resource.kind,
            }
        else:
            try:
                items = kind.list(
                    target.namespace if resource.namespaced else None,
                    query.get("labelSelector"),
                    query.get("fieldSelector"),
                )
            except SelectorError:
                return None  # a selector only the server evaluates
            body = {
                "apiVersion": resource.api_version,
                "kind": f"{resource.kind}List",
                "metadata": {"resourceVersion": kind.resource_version},
                "items": [
                    {**item, "apiVersion": resource.api_version, "kind": resource.kind}
                    for item in items
                ],
            }
        self.stats["cache_hits"] += 1
        if self.on_cache_hit is not None:
            self.on_cache_hit()
        return web.json_response(body, headers={"X-Cache": "HIT"})

    # ----- ownership ------------------------------------------------------------
    async def _mark_ownership(
        self,
        request: web.Request,
        target: ResourcePath,
        resource: Resource,
        owner: Owner,
        body: bytes,
    ) -> bytes:
        if not self.inject_owner_ref or not body:
            return body
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        namespace = target.namespace if resource.namespaced else None
        try:
            if request.method == "PATCH" and content_type == APPLY_PATCH:
                document = yaml.safe_load(body)
            else:
                document = json.loads(body)
        except (ValueError, yaml.YAMLError):
            return body
        if not isinstance(document, dict):
            return body  # a JSON patch (a list): left as is
        merge_patch = request.method == "PATCH" and content_type in MERGE_PATCHES
        if merge_patch and not ownership.patch_removes_ours(document, owner):
            return body
        metadata = document.get("metadata") or {}
        if request.method == "POST":
            namespace = metadata.get("namespace") or namespace
            injection = ownership.inject(document, owner, namespace)
        else:
            # A replace, an apply or a patch dropping our mark: it creates the
            # object, or updates one that may not be ours to mark.
            found, existing = await self._existing(request, target, resource, owner)
            if not found:
                log.warning(
                    "ownership left alone kind=%s namespace=%s name=%s owner=%s reason=%s",
                    resource.kind,
                    namespace or "",
                    target.name,
                    owner.describe(),
                    "could not read the object to tell whether the run creates it",
                )
                return body
            injection = ownership.mark_write(document, owner, namespace, existing=existing)
        if injection.note:
            log.warning(
                "ownership left alone kind=%s namespace=%s name=%s owner=%s reason=%s",
                resource.kind,
                namespace or "",
                metadata.get("name") or target.name,
                owner.describe(),
                injection.note,
            )
        if not injection.changed:
            return body
        self.stats["injected"] += 1
        return json.dumps(injection.body).encode()

    async def _existing(
        self, request: web.Request, target: ResourcePath, resource: Resource, owner: Owner
    ) -> tuple[bool, dict[str, Any] | None]:
        """(read, the object as it is now or None when absent). A cached copy
        that carries our mark is enough; anything else is read from the server,
        so an object made a moment ago by hand is never taken for a new one."""
        namespace = target.namespace if resource.namespaced else None
        if target.name is not None:
            kind = self._cached(resource, namespace, owner)
            cached = kind.get(namespace, target.name) if kind is not None else None
            if cached is not None and ownership.carries_ours(cached, owner):
                return True, cached
        assert self._upstreams is not None
        async with self._upstreams.use() as via:
            url = via.server.rstrip("/") + request.rel_url.raw_path
            headers = {"Accept": "application/json", **(await self.config.auth_headers())}
            try:
                async with via.session.get(url, headers=headers, allow_redirects=False) as answer:
                    if answer.status == 404:
                        return True, None
                    if answer.status != 200:
                        return False, None
                    current = await answer.json(content_type=None)
            except (aiohttp.ClientError, ValueError):
                return False, None
        return isinstance(current, dict), current if isinstance(current, dict) else None

    # ----- forwarding ---------------------------------------------------------
    @staticmethod
    def _upstream_url(request: web.Request, server: str) -> URL:
        """The API server's URL with the path and query exactly as the run sent
        them: decoded and encoded again, `%2F` or `%26` would mean another thing."""
        return URL(server.rstrip("/") + request.rel_url.raw_path_qs, encoded=True)

    async def _forward(
        self, request: web.Request, body: bytes, target: ResourcePath | None, grant: Grant
    ) -> tuple[web.StreamResponse, bytes | None]:
        """The API server's answer, and its body when it was buffered."""
        assert self._upstreams is not None
        async with self._upstreams.use() as via:
            return await self._forward_via(via, request, body, target, grant)

    async def _forward_via(
        self,
        via: Upstream,
        request: web.Request,
        body: bytes,
        target: ResourcePath | None,
        grant: Grant,
    ) -> tuple[web.StreamResponse, bytes | None]:
        self.stats["forwarded"] += 1
        headers = forwarded_headers(request)
        if request.method == "PATCH" and headers.get("Content-Type", "").startswith(APPLY_PATCH):
            # We may have re-encoded the YAML body as JSON (JSON is YAML).
            headers["Content-Type"] = APPLY_PATCH
        headers.update(await self.config.auth_headers())
        url = self._upstream_url(request, via.server)
        try:
            upstream = await via.session.request(
                request.method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
            )
        except aiohttp.ClientError as error:
            return status_response(502, "BadGateway", f"API server unreachable: {error}"), None
        async with upstream:
            answer_headers = CIMultiDict(
                (key, value)
                for key, value in upstream.headers.items()
                if key.lower() not in HOP_BY_HOP
            )
            watching = request.query.get("watch") in ("1", "true")
            if relayed_as_it_comes(request.method, target, watching, upstream.content_length):
                response = web.StreamResponse(
                    status=upstream.status, reason=upstream.reason, headers=answer_headers
                )
                await response.prepare(request)
                await until_revoked(grant, copy_body(upstream, response))
                await response.write_eof()
                return response, None
            # A body of known, modest size goes back in one write: a streamed
            # response costs a socket send per chunk plus the chunked framing.
            payload = await upstream.read()
            buffered = web.Response(
                status=upstream.status,
                reason=upstream.reason,
                body=payload,
                headers=answer_headers,
            )
            return buffered, payload

    async def _after_write(
        self, target: ResourcePath, resource: Resource, owner: Owner, payload: bytes, method: str
    ) -> None:
        """A run's write succeeded: follow the kind as a dependent, note an
        object left unowned, and let the run read back what it wrote."""
        obj: Any = None
        with contextlib.suppress(ValueError):
            obj = json.loads(payload)
        if not isinstance(obj, dict) or obj.get("kind") != resource.kind:
            obj = None
        if method != "DELETE" and self.on_write is not None:
            # The object written: its change event is this run's own (dependents.py).
            self.on_write(resource, owner, obj)
        if obj is not None:
            if method in ("PUT", "PATCH") and target.subresource is None:
                self._say_if_unowned(resource, obj, owner)
            metadata = obj.get("metadata") or {}
            kind = self._cached(resource, metadata.get("namespace") or None, owner)
            if kind is not None:
                # Read-your-writes: the role's next GET sees this version.
                # A DELETE answers with the object as it was (or still is,
                # while finalizers run): gone only if it has no finalizers.
                gone = method == "DELETE" and not metadata.get("finalizers")
                kind.remember(obj, deleted=gone)

    def _say_if_unowned(self, resource: Resource, obj: dict[str, Any], owner: Owner) -> None:
        """Once per object and owner: a run updated an object it did not create,
        and it stays without our mark (so deleting the owner leaves it alone)."""
        metadata = obj.get("metadata") or {}
        uid = metadata.get("uid")
        if not self.inject_owner_ref or not uid or uid == owner.uid:
            return
        if ownership.carries_ours(obj, owner) or (owner.uid, uid) in self._unowned_said:
            return
        if len(self._unowned_said) >= UNOWNED_REMEMBERED:
            self._unowned_said.clear()
        self._unowned_said.add((owner.uid, uid))
        log.info(
            "write left object unowned kind=%s namespace=%s name=%s owner=%s reason=%s",
            resource.kind,
            metadata.get("namespace") or "",
            metadata.get("name"),
            owner.describe(),
            "the run did not create it; only objects a run creates get the owner's mark",
        )

    # ----- upgrades (exec, attach, port-forward) -----------------------------
    async def _tunnel(self, request: web.Request, grant: Grant) -> web.StreamResponse:
        assert self._upstreams is not None
        async with self._upstreams.use() as via:
            return await self._tunnel_via(via, request, grant)

    async def _tunnel_via(
        self, via: Upstream, request: web.Request, grant: Grant
    ) -> web.StreamResponse:
        """Relay a WebSocket upgrade (how the Python client and recent kubectl
        exec, attach and port-forward) frame by frame, with our credentials."""
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return status_response(
                501, "NotImplemented", "the proxy relays WebSocket upgrades only (not SPDY)"
            )
        protocols = [
            p.strip()
            for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
            if p.strip()
        ]
        url = self._upstream_url(request, via.server)
        try:
            upstream = await via.session.ws_connect(
                url,
                protocols=protocols,
                headers=await self.config.auth_headers(),
                autoping=True,
                max_msg_size=0,
            )
        except aiohttp.WSServerHandshakeError as error:
            return web.Response(status=error.status, text=error.message)
        except aiohttp.ClientError as error:
            return status_response(502, "BadGateway", f"API server unreachable: {error}")
        downstream = web.WebSocketResponse(
            protocols=[upstream.protocol] if upstream.protocol else (), max_msg_size=0
        )
        await downstream.prepare(request)
        async with upstream:
            await until_revoked(grant, relay_tunnel(upstream, downstream))
            await downstream.close()  # no-op unless the run ended first
        return downstream
