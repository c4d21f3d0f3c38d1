"""The Kubernetes API proxy every run talks through: its listening socket,
its lifetime, and the runs' grants. What it does with a request is a
pipeline of rules (pipeline.py, one module per rule in rules/):

- Loopback only; each run authenticates with its own secret token (from its
  kubeconfig), which names the run's owner (grants.py).
- Writes get the owner marked (ownership.py) and are reported to the
  dependent registry (writes.py), so drift of what a run made re-runs its owner.
- GET and LIST of kinds the operator caches are answered from the cache;
  everything else is forwarded with the operator's own credentials.
- The API server's RBAC refusals (403) are recorded for the run they answer,
  so a failed task hidden by no_log still says what was refused.
- Errors of the proxy's own are Kubernetes Status bodies, as the API server's are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import aiohttp
from aiohttp import web

from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.kubeconfig import build_kubeconfig
from ansible_operator.kube.types import Owner
from ansible_operator.kube.upstreams import Upstreams
from ansible_operator.proxy.cache_view import ObjectCache
from ansible_operator.proxy.exchange import Exchange, Handler, Services
from ansible_operator.proxy.grants import Grants
from ansible_operator.proxy.pipeline import LAST, RULES, chained
from ansible_operator.proxy.writes import DependentRegistry
from ansible_operator.runner.access import RunAccess
from ansible_operator.serving.http_malformed import StrictAppRunner

PROXY_SHUTDOWN_TIMEOUT = 1.0  # seconds a stop waits for requests still open

log = logging.getLogger("ansible_operator.proxy")


class ApiProxy:
    def __init__(
        self,
        config: KubeConfig,
        mapper: RestMapper,
        *,
        cache: ObjectCache | None = None,
        dependents: DependentRegistry | None = None,
        inject_owner_ref: bool = True,
        shard_labels: bool = False,
        port: int = 8888,
        trace_configs: list[aiohttp.TraceConfig] | None = None,
        on_cache_hit: Callable[[], None] | None = None,
        coerce_strings: bool = True,
    ) -> None:
        """`cache`: the operator's informers, which reads are answered from;
        `dependents`: told of every write (and which kinds a run may read
        from the cache); `on_cache_hit`: counts the reads the cache answered;
        `shard_labels` (a replica of a shard ring): what runs mark also gets
        its owner's shard label (proxy/ownership.py); `coerce_strings`: numbers and
        booleans in string-only fields are sent as ansible-core 2.18's strings
        (runner/string_fields.py)."""
        self.config = config
        self.mapper = mapper
        self.cache = cache
        self.dependents = dependents
        self.inject_owner_ref = inject_owner_ref
        self.shard_labels = shard_labels
        self.port = port
        self.trace_configs = trace_configs
        self.on_cache_hit = on_cache_hit
        self.coerce_strings = coerce_strings
        self.bound_port: int | None = None
        # Requests sent on to the API server (tests read it: a refused request is never sent).
        self.stats = {"forwarded": 0}
        self._grants = Grants()
        self._serve: Handler = chained(RULES, LAST)
        self._services: Services | None = None
        self._runner: web.AppRunner | None = None

    # ----- per-run access (the AccessProvider the reconciler uses) -----------
    def grant(
        self, owner: Owner, *, writes: bool = True, owns: bool = True, dry_run: bool = False
    ) -> RunAccess:
        if self.bound_port is None:
            raise RuntimeError("the proxy is not started")
        token, revoke, issued = self._grants.issue(owner, writes=writes, owns=owns, dry_run=dry_run)
        kubeconfig = build_kubeconfig(
            f"http://127.0.0.1:{self.bound_port}",
            name="ansible-operator-proxy",
            token=token,
            namespace=owner.namespace or None,
        )
        return RunAccess(
            kubeconfig=kubeconfig,
            revoke=revoke,
            refusals=issued.refusals,
            coercions=issued.coercions,
            owner_conditions=issued.owner_conditions,
        )

    # ----- lifecycle -----------------------------------------------------------
    def _new_session(self, config: KubeConfig) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=config.ssl, limit=64),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            trace_configs=self.trace_configs,
        )

    async def start(self) -> int:
        self._services = Services(
            config=self.config,
            # Sessions to the API server, following a changed kubeconfig (kube/upstreams.py).
            upstreams=Upstreams(self.config, self._new_session),
            mapper=self.mapper,
            grants=self._grants,
            cache=self.cache,
            dependents=self.dependents,
            inject_owner_ref=self.inject_owner_ref,
            shard_labels=self.shard_labels,
            stats=self.stats,
            on_cache_hit=self.on_cache_hit,
            coerce_strings=self.coerce_strings,
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = StrictAppRunner(
            app,
            "proxy",
            handle_signals=False,
            # Stopped after the runs it served ended: what is still open is a watch or
            # a long read of a run that is gone, not worth aiohttp's 60 s of waiting.
            shutdown_timeout=PROXY_SHUTDOWN_TIMEOUT,
        )
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
        if self._services is not None:
            await self._services.upstreams.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._services is not None
        return await self._serve(Exchange(request, self._services))
