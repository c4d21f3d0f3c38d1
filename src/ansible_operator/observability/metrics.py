"""Prometheus metrics: the reference's names, ours, and users' (osdk_metric)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import aiohttp
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ansible_operator import __version__
from ansible_operator.observability.user_metrics import UserMetrics

# The event loop's lag: from "on time" to "a probe would time out".
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
RUN_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 60, 120, 300, 600)
# A key's wait in the queue: an edit's fraction of a second, a start's backlog of an hour.
QUEUE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        build = Gauge("ansible_operator_build_info", "Build information", ["version"], registry=r)
        build.labels(version=__version__).set(1)
        self.reconcile_result = Counter(
            "ansible_operator_reconcile_result",
            "Results of reconciles per GVK",
            ["GVK", "result"],
            registry=r,
        )
        self.reconciles = Histogram(
            "ansible_operator_reconciles",
            "How long a reconcile took, whole (status writes included), in seconds",
            ["GVK"],
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self.run_duration = Histogram(
            "ansible_operator_run_duration_seconds",
            "Wall time of the Ansible run alone, from process start to exit",
            ["GVK", "result"],
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self.resource_created_at = CreationTimes()
        r.register(self.resource_created_at)
        self.queue_depth = Gauge(
            "ansible_operator_queue_depth", "Objects waiting for a worker", ["GVK"], registry=r
        )
        self.queue_depth_by_source = Gauge(
            "ansible_operator_queue_depth_by_source",
            "Objects waiting for a worker, by what queued them at their priority "
            "(change, requeue, retry, periodic, list)",
            ["GVK", "source"],
            registry=r,
        )
        self.queue_duration = Histogram(
            "ansible_operator_queue_duration_seconds",
            "How long a key waited in the queue for a worker, from when it was queued at "
            "the priority it was handed out at, by what queued it there",
            ["GVK", "source"],
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.runs_in_flight = Gauge(
            "ansible_operator_runs_in_flight", "Ansible runs in progress", ["GVK"], registry=r
        )
        self.api_requests = Counter(
            "ansible_operator_api_requests",
            "Requests sent to the API server: by the operator itself, or by runs through the proxy",
            ["source", "method"],
            registry=r,
        )
        self.proxy_cache_hits = Counter(
            "ansible_operator_proxy_cache_hits",
            "Reads of runs answered from the operator's cache instead of the API server",
            registry=r,
        )
        # observability/loop_watchdog.py
        self.event_loop_lag = Histogram(
            "ansible_operator_event_loop_lag_seconds",
            "How late the operator's event loop ran a heartbeat asked for every 0.25s",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.event_loop_blocked = Counter(
            "ansible_operator_event_loop_blocked_seconds",
            "Seconds the event loop was blocked: the sum of heartbeat lags of 0.1s or more",
            registry=r,
        )
        self.event_loop_blocked_max = Gauge(
            "ansible_operator_event_loop_blocked_seconds_max",
            "The longest the event loop was blocked since the operator started, in seconds",
            registry=r,
        )
        # The runner directory's cap (runner/disk_budget.py): alert on bytes or files
        # near their --runner-dir-max-* and on pruning that never stops.
        self.runner_dir_bytes = Gauge(
            "ansible_operator_runner_dir_bytes",
            "Bytes the runner directory takes (allocated blocks), as the operator tallies them",
            registry=r,
        )
        self.runner_dir_files = Gauge(
            "ansible_operator_runner_dir_files",
            "Files and directories (inodes) in the runner directory, as the operator tallies them",
            registry=r,
        )
        self.runner_artifacts_pruned = Counter(
            "ansible_operator_runner_artifacts_pruned",
            "Run artifact directories removed to keep the runner directory under its caps",
            registry=r,
        )
        self.warm_runner_restarts = Counter(
            "ansible_operator_warm_runner_restarts",
            "Warm runners started again because the one before exited "
            "(killed, out of memory, crashed)",
            registry=r,
        )
        self.warm_runner_pid = Gauge(
            "ansible_operator_warm_runner_pid",
            "Process id of the warm runner serving runs now (0: none ready, or reference mode)",
            registry=r,
        )
        # controller-runtime's name and meaning, so that dashboards and alerts carry over.
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the leader Lease (--leader-elect), else 0",
            ["name"],
            registry=r,
        )
        # Admission webhooks (webhooks/): one count per decision and per request refused
        # before any decision, as controller-runtime's webhook_requests_total.
        self.webhook_admissions = Counter(
            "ansible_operator_webhook_admissions",
            "Admission requests decided, by webhook and decision "
            "(allowed, denied, or policy: the failurePolicy decided because the run could not)",
            ["webhook", "decision"],
            registry=r,
        )
        self.webhook_refused = Counter(
            "ansible_operator_webhook_requests_refused",
            "Webhook requests refused before any decision, by webhook and HTTP status "
            "(429: past the client's rate or slots; 400: not an AdmissionReview we can read)",
            ["webhook", "status"],
            registry=r,
        )
        # Conversion webhooks (watches.yaml `- conversion:`): reviews answered, objects.
        self.conversion_reviews = Counter(
            "ansible_operator_conversion_reviews",
            "ConversionReviews answered, by kind (KIND.GROUP), the version asked for and "
            "result (succeeded, or failed: refused with a message naming the entry)",
            ["kind", "version", "result"],
            registry=r,
        )
        self.conversion_objects = Counter(
            "ansible_operator_conversion_objects",
            "Objects converted, by kind (KIND.GROUP) and how (fieldMap, role)",
            ["kind", "how"],
            registry=r,
        )
        self.conversion_seconds = Histogram(
            "ansible_operator_conversion_seconds",
            "Time to answer a ConversionReview, body read to answer written, by kind and how",
            ["kind", "how"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        # A ring of replicas (sharding/ring.py): this replica's part of it.
        self.shard_members = Gauge(
            "ansible_operator_shard_members",
            "Live members of the shard ring, as this replica sees its Leases",
            ["ring"],
            registry=r,
        )
        self.shard_buckets_held = Gauge(
            "ansible_operator_shard_buckets_held",
            "Hash buckets (of 120) this replica reconciles now",
            ["ring"],
            registry=r,
        )
        self.shard_server_side = Gauge(
            "ansible_operator_shard_server_side",
            "1 when the API server filters this replica's watches by its share, "
            "0 when the replica filters them itself",
            ["ring"],
            registry=r,
        )
        self.shard_handovers = Counter(
            "ansible_operator_shard_handovers",
            "Buckets this replica took on (direction=gained) or handed over (direction=released)",
            ["ring", "direction"],
            registry=r,
        )
        self._user = UserMetrics(r)
        self._accelerations: _AccelerationCollector | None = None
        self._cache: _CacheCollector | None = None

    def track_accelerations(
        self, enabled: Mapping[str, bool], read_hits: Callable[[], Mapping[str, int]]
    ) -> None:
        """The warm runner's accelerations: which are on, and how often each
        was used (read at each scrape, from the counters the runs share)."""
        if self._accelerations is None:
            self._accelerations = _AccelerationCollector()
            self.registry.register(self._accelerations)
        self._accelerations.enabled = dict(enabled)
        self._accelerations.read_hits = read_hits

    def track_cache(
        self,
        read_held: Callable[[], Mapping[str, tuple[int, int]]],
        read_received: Callable[[], Mapping[str, int]] = dict,
        read_dropped: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        """The informers' stores: objects and estimated bytes held per informer,
        objects the server sent each, and (a shard ring's replica) those of
        them dropped as another replica's, read at each scrape (each informer
        keeps its totals as objects come and go, so a scrape costs nothing per object)."""
        if self._cache is None:
            self._cache = _CacheCollector()
            self.registry.register(self._cache)
        self._cache.read_held = read_held
        self._cache.read_received = read_received
        self._cache.read_dropped = read_dropped

    def forget_object(self, name: str, namespace: str, group: str, version: str, kind: str) -> None:
        """A deleted object's series go: without this, every object ever
        reconciled would stay in the exposition for the operator's life."""
        with contextlib.suppress(KeyError):
            self.resource_created_at.remove(name, namespace, group, version, kind)

    def forget_namespace(self, namespace: str, group: str, version: str, kind: str) -> None:
        """The series of one kind's objects in a namespace that left the watched
        ones: nobody deleted them, but they are no longer ours to report."""
        self.resource_created_at.forget_namespace(namespace, group, version, kind)

    def request_counter(self, source: str) -> aiohttp.TraceConfig:
        """Counts every request of the aiohttp session it is given to."""

        async def started(
            _session: aiohttp.ClientSession,
            _context: object,
            params: aiohttp.TraceRequestStartParams,
        ) -> None:
            self.api_requests.labels(source, params.method).inc()

        trace = aiohttp.TraceConfig()
        trace.on_request_start.append(started)
        return trace

    def user_metric(self, payload: dict[str, Any]) -> None:
        """Apply one osdk_metric payload, as the Go operator does.
        Raises ValueError, with Go's message, on a payload it refuses."""
        self._user.apply(payload)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


ObjectLabels = tuple[str, str, str, str, str]  # name, namespace, group, version, kind


class CreationTimes(Collector):
    """`resource_created_at_seconds`, the reference's series per reconciled
    object, kept as one mapping: ~230 bytes per object where a prometheus_client
    Gauge child costs ~790 (two locks each), 5.6 MB less at 10,000 objects.
    Writing the series out still costs ~12 µs each per scrape (the /metrics
    handler does it in a thread)."""

    LABELS = ("name", "namespace", "group", "version", "kind")

    def __init__(self) -> None:
        self._times: dict[ObjectLabels, float] = {}

    def labels(self, name: str, namespace: str, group: str, version: str, kind: str) -> _Time:
        return _Time(self._times, (name, namespace, group, version, kind))

    def remove(self, name: str, namespace: str, group: str, version: str, kind: str) -> None:
        """Raises KeyError for an object without a series, as Gauge.remove does."""
        del self._times[(name, namespace, group, version, kind)]

    def forget_namespace(self, namespace: str, group: str, version: str, kind: str) -> None:
        place = (namespace, group, version, kind)
        for key in [key for key in self._times if key[1:] == place]:
            del self._times[key]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "resource_created_at_seconds",
            "Creation timestamp of reconciled objects",
            labels=list(self.LABELS),
        )
        # A copy taken at once: a scrape may run in a thread while objects come and go.
        for labels, created in list(self._times.items()):
            family.add_metric(list(labels), created)
        yield family


class _Time:
    def __init__(self, times: dict[ObjectLabels, float], key: ObjectLabels) -> None:
        self._times, self._key = times, key

    def set(self, value: float) -> None:
        self._times[self._key] = float(value)


class _AccelerationCollector(Collector):
    def __init__(self) -> None:
        self.enabled: dict[str, bool] = {}
        self.read_hits: Callable[[], Mapping[str, int]] = dict

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        on = GaugeMetricFamily(
            "ansible_operator_acceleration_enabled",
            "1 if the warm-runner acceleration applies to the installed Ansible and is on "
            "(ansible-operator doctor says why not)",
            labels=["acceleration"],
        )
        for name, enabled in self.enabled.items():
            on.add_metric([name], 1.0 if enabled else 0.0)
        yield on
        hits = CounterMetricFamily(
            "ansible_operator_acceleration_hits",
            "Times each warm-runner acceleration did its work",
            labels=["acceleration"],
        )
        for name, count in self.read_hits().items():
            hits.add_metric([name], float(count))
        yield hits


class _CacheCollector(Collector):
    def __init__(self) -> None:
        self.read_held: Callable[[], Mapping[str, tuple[int, int]]] = dict
        self.read_received: Callable[[], Mapping[str, int]] = dict
        self.read_dropped: Callable[[], Mapping[str, int]] = dict

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        objects = GaugeMetricFamily(
            "ansible_operator_cache_objects",
            "Objects an informer's store holds",
            labels=["informer"],
        )
        size = GaugeMetricFamily(
            "ansible_operator_cache_bytes",
            "Estimated bytes an informer's store holds (sys.getsizeof of each stored "
            "object's dicts, lists and strings, counted once when stored)",
            labels=["informer"],
        )
        for informer, (count, held) in sorted(self.read_held().items()):
            objects.add_metric([informer], float(count))
            size.add_metric([informer], float(held))
        yield objects
        yield size
        received = CounterMetricFamily(
            "ansible_operator_watch_events",
            "Objects the API server sent an informer, by lists and watch events, before "
            "any filtering by the operator (a sharded watch is sent only its share)",
            labels=["resource"],
        )
        for informer, count in sorted(self.read_received().items()):
            received.add_metric([informer], float(count))
        yield received
        dropped = CounterMetricFamily(
            "ansible_operator_shard_dropped",
            "Objects the API server sent an informer of a shard ring's replica that were "
            "another replica's, dropped before they were stored (the server does not "
            "filter by shard: the replica receives everything and keeps its share)",
            labels=["resource"],
        )
        for informer, count in sorted(self.read_dropped().items()):
            dropped.add_metric([informer], float(count))
        yield dropped
