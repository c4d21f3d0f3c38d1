"""The manager: owns the API client, informers, controllers, the runner host
(event receiver, the launcher of runs, the runs' cgroups), the API proxy, metrics
and health servers and leader election; starts them in order and stops them
gracefully (SIGTERM: stop taking work, let runs finish up to the
graceful-shutdown timeout, then kill them).

    health, metrics -> proxy, runner host -> webhooks (every replica)
    -> caches (informers synced, queues filled) while standing by for the leader
       Lease -> workers; or joining the shard ring -> caches -> workers

A standby is warm (controller-runtime's `EnableWarmup`): its informers are
synced, its controllers' queues hold what they announced and its warm runner
is started (with the runner host) before it leads, so that it reconciles
within moments of taking the Lease; it reports ready (`/readyz`) once its
caches are synced. A leader that stops cleanly releases the Lease after its
runs end, and a standby watching the Lease takes it at once (leader.py)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ansible_operator.controller.controller import Controller
from ansible_operator.controller.handlers import request_for_object, run_stop_reason
from ansible_operator.controller.priorities import event_source
from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.discovery import RestMapper
from ansible_operator.kube.impersonation import verify_impersonation
from ansible_operator.kube.informer import EventListener, Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.namespace_selection import SelectedNamespaces
from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.kube.types import Resource
from ansible_operator.lint.assigned_vars import assigned_places
from ansible_operator.manager.api_health import ApiServerHealth
from ansible_operator.manager.bound_addresses import (
    remove_bound_addresses,
    write_bound_addresses,
)
from ansible_operator.manager.dependents import DependentWatches
from ansible_operator.manager.leader_thread import LeaderElectionThread
from ansible_operator.manager.metrics_auth import (
    MetricsAuthorizer,
    metrics_address,
    needs_auth,
    server_tls,
)
from ansible_operator.manager.unserved import UnservedKinds
from ansible_operator.observability.loop_watchdog import LoopWatchdog
from ansible_operator.observability.metrics import Metrics
from ansible_operator.observability.tracing import OFF, Tracing, from_environment
from ansible_operator.project.watch_admission import WatchAdmission
from ansible_operator.project.watches import KindConversion, Watch, Webhook
from ansible_operator.proxy.server import ApiProxy
from ansible_operator.reconciler.annotations import queue_priority
from ansible_operator.reconciler.ansible_reconciler import AnsibleReconciler, Shared
from ansible_operator.runner.host import RunnerHost
from ansible_operator.runner.launcher import Launcher, ReferenceLauncher
from ansible_operator.runner.warm.launcher import WarmLauncher
from ansible_operator.runner.warm.zygote import WarmZygote
from ansible_operator.serving.http_limits import GuardedSite
from ansible_operator.serving.http_malformed import StrictAppRunner
from ansible_operator.settings import Settings
from ansible_operator.settings.precedence import Effective, effective
from ansible_operator.sharding.ring_thread import ShardRingThread

if TYPE_CHECKING:
    from ansible_operator.webhooks.service import WebhookService

log = logging.getLogger("ansible_operator.manager")
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
DRAIN_POLL = 0.1  # seconds between looks at a handed-over shard's reconciles in flight


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """':8443' -> all interfaces; '127.0.0.1:0' -> a free port; '0' -> disabled."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


class Manager:
    def __init__(
        self,
        watches: list[Watch],
        settings: Settings,
        connect: Callable[[str | None], KubeConfig],
        webhooks: list[Webhook] | None = None,
        zygote: WarmZygote | None = None,  # forked by the command, to make the warm runner of
        conversions: list[KindConversion] | None = None,
    ) -> None:
        self.watches = watches
        self.zygote = zygote
        self.webhooks = webhooks or []
        self.conversions = conversions or []
        self.webhook_service: WebhookService | None = None
        self.settings = settings
        # The command chooses where the cluster comes from (cluster.connect_config
        # may fall back to the local control plane); the runtime never imports it.
        self.connect = connect
        self.metrics = Metrics()
        self.controllers: list[Controller] = []
        self.reconcilers: list[AnsibleReconciler] = []
        self.cache: InformerCache | None = None
        self.scope: NamespaceScope | None = None
        # With --shard-ring: the objects this replica reconciles, as the ring moves them.
        self.share: ObjectShare | None = None
        self.ring: ShardRingThread | None = None
        self._primaries: list[tuple[Controller, Informer]] = []
        self._working = False  # the controllers' workers run (this replica leads)
        self.dependents: DependentWatches | None = None
        self.mapper: RestMapper | None = None
        self.proxy: ApiProxy | None = None
        self.api_health: ApiServerHealth | None = None
        self.ready = False  # this replica's controllers run
        self.standing_by = False  # waiting for the leader lease
        self.stopping = asyncio.Event()
        self._sites: list[web.AppRunner] = []
        self.bound: dict[str, tuple[str, int]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.tracing: Tracing = OFF  # OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT set: on (run)

    # ----- servers -----------------------------------------------------------
    async def _serve(
        self, name: str, address: str, app: web.Application, tls: ssl.SSLContext | None = None
    ) -> None:
        bind = parse_bind_address(address)
        if bind is None:
            return
        runner = StrictAppRunner(app, name)
        await runner.setup()
        # GuardedSite: a TLS handshake is timed and counted like a request's headers.
        site = GuardedSite(runner, bind[0], bind[1], tls=tls)
        await site.start()
        self._sites.append(runner)
        self.bound[name] = site.bound  # the bound port, for ':0'
        log.info("%s server listening address=%s", name, self.bound.get(name, bind))

    def _bound_addresses(self) -> dict[str, tuple[str, int]]:
        """Where each server of this process listens (bound_addresses.py)."""
        addresses = dict(self.bound)
        if self.proxy is not None and self.proxy.bound_port is not None:
            addresses["proxy"] = ("127.0.0.1", self.proxy.bound_port)
        if self.webhook_service is not None and self.webhook_service.bound is not None:
            addresses["webhook"] = self.webhook_service.bound
        return addresses

    def _health_app(self) -> web.Application:
        # controller-runtime's meanings: /healthz liveness (fails: restart me),
        # /readyz readiness; both also judge the API server (manager/api_health.py).
        async def healthz(_request: web.Request) -> web.Response:
            reason = self.api_health.unhealthy_reason() if self.api_health else None
            if reason is not None:
                return web.Response(status=500, text=f"unhealthy: {reason}")
            return web.Response(text="ok")

        async def readyz(_request: web.Request) -> web.Response:
            # A standby replica waiting for the lease is ready, as in
            # controller-runtime: else a Deployment of two is never Available.
            if not (self.ready or self.standing_by) or self.stopping.is_set():
                return web.Response(status=503, text="not ready")
            reason = self.api_health.unready_reason() if self.api_health else None
            if reason is not None:
                return web.Response(status=503, text=f"not ready: {reason}")
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        return app

    def _metrics_app(self, api: ApiClient) -> web.Application:
        async def metrics(_request: web.Request) -> web.Response:
            for controller in self.controllers:
                controller.observe_queue()
            # In a thread: with a series per object, 10,000 objects take ~0.2 s
            # of CPU to write out, which would stall every run's events and the probes.
            body = await asyncio.to_thread(self.metrics.exposition)
            return web.Response(
                body=body,
                headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
            )

        guards = [MetricsAuthorizer(api).middleware()] if needs_auth(self.settings) else []
        app = web.Application(middlewares=guards)
        app.router.add_get("/metrics", metrics)
        return app

    async def _serve_metrics(self, api: ApiClient, scratch: Path) -> None:
        address = metrics_address(self.settings)
        bind = parse_bind_address(address)
        if bind is not None and not needs_auth(self.settings) and bind[0] not in LOOPBACK:
            log.warning(
                "metrics are served to anyone who can reach %s: add --metrics-secure", address
            )
        tls = server_tls(self.settings, scratch)
        await self._serve("metrics", address, self._metrics_app(api), tls)

    # ----- lifecycle ---------------------------------------------------------
    def request_stop(self) -> None:
        if not self.stopping.is_set():
            log.info("shutdown requested; no new runs will start")
            self.stopping.set()

    def _leader_namespace(self) -> str:
        if self.settings.leader_election.namespace:
            return self.settings.leader_election.namespace
        if IN_CLUSTER_NAMESPACE.exists():
            return IN_CLUSTER_NAMESPACE.read_text().strip()
        raise SystemExit(
            "--leader-election-namespace is required with --leader-elect or --shard-ring "
            "outside a cluster"
        )

    async def run(self) -> int:
        """Start every part in order, serve until stopped (or the Lease is lost), stop
        them in reverse: each start below registers its stop on `started` as it
        succeeds, so a failed start stops exactly what had started."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, self.request_stop)
        config = self.connect(self.settings.watching.kubeconfig)
        if self.settings.watching.impersonate:
            config.impersonate = self.settings.watching.impersonate
        async with contextlib.AsyncExitStack() as started:
            # mkdtemp creates it 0700: the event socket inside is ours alone.
            scratch = Path(tempfile.mkdtemp(prefix="ansible-operator-"))
            started.callback(shutil.rmtree, scratch, ignore_errors=True)
            # Off unless an OTLP endpoint is set (then the SDK is imported); stopped
            # last, once every run has ended: its spans are flushed.
            self.tracing = from_environment()
            started.push_async_callback(self.tracing.shutdown)
            # Reads ansible-core's variable names in a child process meanwhile.
            admission = WatchAdmission(Path.cwd(), os.environ, assigned=assigned_places)
            admission.start()
            started.push_async_callback(admission.stop)
            # From its own thread: how late this loop runs (probes, events, the proxy
            # wait as long).
            watchdog = LoopWatchdog(self.metrics)
            watchdog.start()
            started.callback(watchdog.stop)
            api = await started.enter_async_context(
                ApiClient(config, trace_configs=[self.metrics.request_counter("operator")])
            )
            if config.impersonate:
                await self._say_whom_we_act_as(api)
            await self._start_serving(started, api, scratch)
            host = await self._start_run_path(started, config, api, scratch)
            if self.webhooks or self.conversions:
                await self._start_webhooks(api, scratch, host)
                started.push_async_callback(self._stop_webhooks)
            addresses_file = self.settings.health.bound_addresses_file
            if addresses_file is not None:
                write_bound_addresses(addresses_file, self._bound_addresses())
                started.callback(remove_bound_addresses, addresses_file)
            shared = Shared(
                api=api,
                settings=self.settings,
                metrics=self.metrics,
                runner=host,
                admission=admission,
                dependents=self.dependents,
                tracing=self.tracing,
            )
            warm = functools.partial(self._start_caches, started, shared)
            elector = None
            if self.settings.leader_election.enabled:
                elector = await self._lead(config, warm)
                if elector is None:
                    return 0  # stopped while standing by
            elif self.share is not None:
                # On a thread of its own, as leader election: renewal never waits for
                # this loop. The share is empty until it joins: caches after.
                self.ring = self._shard_ring(config, self.share)
                await self.ring.join()
                await warm()
            else:
                await warm()
            self._start_workers()
            self.ready = True
            # Only now: a new leader stays ready while its controllers start.
            self.standing_by = False
            assert self.scope is not None
            log.info(
                "operator started watches=%d namespaces=%s",
                len(self.watches),
                self.scope.describe(),
            )
            lost = await self._serve_until_stopped(elector)
            await self._shutdown(0.0 if lost else self.settings.runs.graceful_shutdown_timeout)
            if elector is not None:
                self.metrics.leader.labels(self.settings.leader_election.id).set(0)
                await elector.release()
            if self.ring is not None:
                await self.ring.leave()  # after the runs ended: hand over at once
            return 1 if lost else 0
        raise AssertionError("unreachable")  # the block returns or raises

    async def _start_serving(
        self, started: contextlib.AsyncExitStack, api: ApiClient, scratch: Path
    ) -> None:
        """The health and metrics servers, and the API server's health behind them."""
        self.api_health = ApiServerHealth(
            api,
            ready_grace=self.settings.health.api_server_ready_grace,
            live_grace=self.settings.health.api_server_live_grace,
        )
        prober = asyncio.create_task(self.api_health.probe_forever())
        started.callback(prober.cancel)
        started.push_async_callback(self._stop_sites)
        await self._serve("health", self.settings.health.probe_bind_address, self._health_app())
        await self._serve_metrics(api, scratch)

    async def _start_run_path(
        self,
        started: contextlib.AsyncExitStack,
        config: KubeConfig,
        api: ApiClient,
        scratch: Path,
    ) -> RunnerHost:
        """What a run goes through: the scope and cache the proxy reads from, the proxy,
        the runner host. One of each for every run of this process, the webhooks'
        too: started before the election, as the webhooks are."""
        self.mapper = RestMapper(api)
        self.scope = await self._namespace_scope(api)
        started.push_async_callback(self.scope.stop)
        if self.settings.leader_election.shard_ring:
            # Empty until the ring gives this replica its share (sharding/ring.py).
            self.share = ObjectShare()
        self.cache = InformerCache(api, self.scope, share=self.share)
        self.metrics.track_cache(self.cache.held, self.cache.received, self.cache.dropped)
        self.dependents = DependentWatches(self.cache)
        self.proxy = ApiProxy(
            config,
            self.mapper,
            cache=self.cache,
            dependents=self.dependents,
            inject_owner_ref=self.settings.proxy.inject_owner_ref,
            coerce_strings=self.settings.proxy.coerce_strings,
            shard_labels=self.share is not None,
            port=self.settings.proxy.port,
            trace_configs=[self.metrics.request_counter("proxy")],
            on_cache_hit=self.metrics.proxy_cache_hits.inc,
        )
        await self.proxy.start()
        started.push_async_callback(self.proxy.stop)  # after the webhooks: their runs use it
        host = RunnerHost(
            settings=self.settings,
            access=self.proxy,
            runner_root=self.settings.runs.runner_dir or scratch / "runs",
            scratch=scratch,
            metrics=self.metrics,
            max_runs=self._global_cap(),
            launcher=self._launcher(scratch),
            tracing=self.tracing,
        )
        await host.start()
        started.push_async_callback(host.stop)
        return host

    async def _lead(
        self, config: KubeConfig, warm: Callable[[], Awaitable[None]]
    ) -> LeaderElectionThread | None:
        """Stand by until this replica holds the leader Lease, warming up meanwhile
        (`warm`: its caches synced, its queues filled); ready once warm, leading
        once both. None if it is stopped meanwhile."""
        election = self.settings.leader_election
        # On a thread of its own: renewal never waits for this loop.
        elector = LeaderElectionThread(
            config,
            trace_configs=[self.metrics.request_counter("operator")],
            name=election.id,
            namespace=self._leader_namespace(),
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
        )
        leading = self.metrics.leader.labels(election.id)
        leading.set(0)
        acquiring = asyncio.create_task(elector.acquire())
        warming = asyncio.ensure_future(warm())
        stop_wait = asyncio.create_task(self.stopping.wait())
        try:
            while not (acquiring.done() and warming.done()):
                waiting = {task for task in (acquiring, warming) if not task.done()}
                await asyncio.wait({*waiting, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if stop_wait.done():
                    return None
                if warming.done():
                    warming.result()  # a failed start of the caches stops the operator
                    self.standing_by = not acquiring.done()
                if acquiring.done():
                    acquiring.result()
        finally:
            for task in (acquiring, warming, stop_wait):
                if not task.done():
                    task.cancel()
        leading.set(1)
        return elector

    async def _serve_until_stopped(self, elector: LeaderElectionThread | None) -> bool:
        """Until a stop is asked or a Lease is lost; whether one was lost."""
        waiters = [asyncio.create_task(self.stopping.wait())]
        if elector is not None:
            waiters.append(asyncio.create_task(elector.lost.wait()))
        if self.ring is not None:
            waiters.append(asyncio.create_task(self.ring.lost.wait()))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        return (elector is not None and elector.lost.is_set()) or (
            self.ring is not None and self.ring.lost.is_set()
        )

    async def _stop_webhooks(self) -> None:
        if self.webhook_service is not None:
            await self.webhook_service.stop()

    async def _stop_sites(self) -> None:
        for runner in self._sites:
            await runner.cleanup()

    async def _namespace_scope(self, api: ApiClient) -> NamespaceScope:
        """WATCH_NAMESPACE's list, or the namespaces --watch-namespace-selector
        picks (listed now, so the informers start with them); the controllers
        forget the objects of a namespace that leaves."""
        selector = self.settings.watching.namespace_selector
        scope: NamespaceScope
        if not selector:
            scope = NamespaceScope(self.settings.watching.namespaces)
        else:
            scope = SelectedNamespaces(api, selector)
            await scope.start()
            await scope.wait_synced()
        scope.add_listener(_ForgetLeftNamespaces(self.controllers, self.reconcilers))
        return scope

    def _shard_ring(self, config: KubeConfig, share: ObjectShare) -> ShardRingThread:
        election = self.settings.leader_election
        assert election.shard_ring is not None
        return ShardRingThread(
            config,
            share,
            self._drain,
            trace_configs=[self.metrics.request_counter("operator")],
            ring=election.shard_ring,
            namespace=self._leader_namespace(),
            metrics=self.metrics,
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
        )

    async def _drain(self, _buckets: frozenset[int]) -> None:
        """The reconciles in flight of objects no longer this replica's (their
        buckets leave for another replica, and the informers have forgotten
        them already: no new run of theirs starts, a queued key reconciles as
        gone), waited for, and stopped after the graceful-shutdown timeout,
        so the ring can hand the buckets over."""

        def running() -> list[tuple[Controller, ObjectKey]]:
            return [
                (controller, key)
                for controller, informer in self._primaries
                for key in controller.in_flight(
                    lambda key, informer=informer: not informer.holds(key.namespace, key.name)
                )
            ]

        deadline = time.monotonic() + self.settings.runs.graceful_shutdown_timeout
        stopped = False
        while in_flight := running():
            if not stopped and time.monotonic() > deadline:
                stopped = True
                for controller, key in in_flight:
                    controller.stop_run(key, "its shard moved to another replica")
                log.info("stopped runs of a shard handed over count=%d", len(in_flight))
            await asyncio.sleep(DRAIN_POLL)

    async def _say_whom_we_act_as(self, api: ApiClient) -> None:
        """`--as`: the API server must take our requests for that identity's,
        or the operator stops here (ImpersonationError) rather than on every request."""
        identity = await verify_impersonation(api)
        if identity is None:
            log.warning(
                "acting as user=%s unverified: the API server serves no SelfSubjectReview",
                api.config.impersonate,
            )
        else:
            log.info("acting as user=%s groups=%s", identity.user, ",".join(identity.groups))

    async def _start_webhooks(self, api: ApiClient, scratch: Path, host: RunnerHost) -> None:
        """Admission webhooks answer on every replica, the leader or not (as in
        controller-runtime): they start before the election."""
        # Imported by the operators that serve webhooks or conversions only:
        # their certificates' code (cryptography) is 60 ms of everyone's start.
        from ansible_operator.webhooks.service import WebhookService

        self.webhook_service = WebhookService(
            self.webhooks,
            self.settings,
            host=host,
            metrics=self.metrics,
            scratch=scratch,
            conversions=self.conversions,
        )
        await self.webhook_service.start(api)

    def _launcher(self, scratch: Path) -> Launcher:
        """How runs start (--runner-mode): forked from the warm runner, made of
        the command's fork of the operator when it made one, or afresh."""
        if self.settings.runs.runner_mode != "warm":
            return ReferenceLauncher()
        return WarmLauncher(
            settings=self.settings,
            scratch=scratch,
            metrics=self.metrics,
            targets=self._run_targets(),
            zygote=self.zygote,
        )

    def _run_targets(self) -> list[dict[str, str]]:
        """Every role and playbook the watches run (finalizers, webhooks and
        conversions included)."""
        pairs = [(watch.role, watch.playbook) for watch in self.watches]
        pairs += [(w.finalizer.role, w.finalizer.playbook) for w in self.watches if w.finalizer]
        pairs += [(webhook.role, webhook.playbook) for webhook in self.webhooks]
        pairs += [
            (version.role.role, version.role.playbook)
            for conversion in self.conversions
            for version in conversion.versions
            if version.role is not None
        ]
        targets: list[dict[str, str]] = []
        for role, playbook in pairs:
            if playbook is not None:  # a playbook wins over a role, as in a run
                target = {"playbook": str(playbook)}
            elif role is not None:
                target = {"role": str(role)}
            else:
                continue
            if target not in targets:
                targets.append(target)
        return targets

    def _global_cap(self) -> int:
        if self.settings.runs.max_concurrent_runs:
            return self.settings.runs.max_concurrent_runs
        return sum(self._effective(watch).workers for watch in self.watches)

    def _effective(self, watch: Watch) -> Effective:
        return effective(watch, self.settings.runs, self.settings.ansible)

    async def _start_caches(self, started: contextlib.AsyncExitStack, shared: Shared) -> None:
        """Each served watch's informer, reconciler and controller, until the
        informers are synced: the controllers' queues hold what they announced,
        and no worker runs yet (`_start_workers`, once this replica leads)."""
        assert self.cache is not None and self.mapper is not None
        started.push_async_callback(self._stop_caches)
        # One discovery for every watch: served kinds start now, whatever the
        # number of kinds the server does not serve (manager/unserved.py).
        await self.mapper.refresh()
        missing: list[Watch] = []
        for watch in self.watches:
            gvk = watch.gvk
            resource = self.mapper.known(gvk.group, gvk.version, gvk.kind)
            if resource is None:
                missing.append(watch)
            else:
                await self._start_controller(watch, resource, shared, wait=False)
        await self.cache.wait_synced()
        if missing:
            start_served = functools.partial(self._start_controller, shared=shared, wait=True)
            unserved = UnservedKinds(self.mapper, missing, start_served)
            unserved.report()
            self._background.add(asyncio.create_task(unserved.run()))

    async def _start_controller(
        self, watch: Watch, resource: Resource, shared: Shared, *, wait: bool
    ) -> None:
        """One watch: its informer, its reconciler reading from it, its controller
        fed by it, and its runs' writes followed as dependents."""
        assert self.cache is not None and self.dependents is not None
        selector = watch.selector.to_query() if watch.selector else None
        informer = self.cache.informer(resource, label_selector=selector)
        reconciler = AnsibleReconciler(watch, resource, informer, shared)
        self.reconcilers.append(reconciler)
        controller = Controller(
            reconciler.gvk_label,
            watch.gvk.kind,
            reconciler,
            workers=self._effective(watch).workers,
            metrics=self.metrics,
            priority=watch.priority,
        )
        if self.share is not None:
            # The informer holds this replica's share only, and the reconciler
            # reads from it: an object handed over to another replica reads as
            # gone. Its key is reconciled so (no run), so that what is kept
            # per object goes with it.
            informer.add_forget_listener(
                lambda keys: [controller.enqueue(ObjectKey(*key)) for key in keys]
            )
        informer.add_listener(_primary_listener(controller, watch))
        self._primaries.append((controller, informer))
        self.dependents.add_owner(watch, controller.enqueue, namespaced=resource.namespaced)
        self.controllers.append(controller)
        if wait:
            await informer.wait_synced()
            if self._working:
                controller.start()

    def _start_workers(self) -> None:
        """This replica reconciles from now on: the workers of every controller
        whose informer is synced (a kind served later starts its own then)."""
        self._working = True
        for controller, informer in self._primaries:
            if informer.synced:
                controller.start()

    async def _shutdown(self, grace: float) -> None:
        for task in self._background:
            task.cancel()
        await asyncio.gather(*(c.stop(grace) for c in self.controllers))

    async def _stop_caches(self) -> None:
        for task in self._background:
            task.cancel()
        if self.cache is not None:
            await self.cache.stop()


class _ForgetLeftNamespaces:
    """The controllers' side of a namespace leaving the scope: its keys leave the
    queues, and the reconcilers' per-object state goes (the informers drop its
    objects themselves, telling no listener)."""

    def __init__(self, controllers: list[Controller], reconcilers: list[AnsibleReconciler]) -> None:
        self.controllers = controllers
        self.reconcilers = reconcilers

    def namespace_entered(self, namespace: str) -> None:
        """Nothing to do: the informers list it and announce its objects."""

    def namespace_left(self, namespace: str) -> None:
        for controller in self.controllers:
            controller.forget_namespace(namespace)
        for reconciler in self.reconcilers:
            reconciler.forget_namespace(namespace)


def _primary_listener(controller: Controller, watch: Watch) -> EventListener:
    finalizer = watch.finalizer.name if watch.finalizer is not None else None

    def on_event(
        event: str, old: dict[str, Any] | None, new: dict[str, Any] | None, listed: bool
    ) -> None:
        if new is not None:  # its priority annotation, for this add and the later ones
            controller.annotated(ObjectKey.of(new), queue_priority(new))
        key = request_for_object(event, old, new, watch_annotations=watch.watch_annotations_changes)
        if key is None:
            return
        stop_reason = run_stop_reason(event, new, finalizer)
        if stop_reason is not None:
            controller.stop_run(key, stop_reason)
        controller.enqueue(key, event_source(event, listed))
        if event == "DELETED":
            controller.annotated(key, 0)  # nothing of it kept

    return on_event
