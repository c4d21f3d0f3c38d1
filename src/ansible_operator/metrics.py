"""Prometheus metrics: the reference's names, ours, and users' (osdk_metric)."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    generate_latest,
)
from prometheus_client.metrics import MetricWrapperBase

from ansible_operator import __version__

RUN_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 60, 120, 300, 600)
_USER_TYPES: dict[str, type[MetricWrapperBase]] = {
    "counter": Counter,
    "gauge": Gauge,
    "histogram": Histogram,
    "summary": Summary,
}
_OPERATIONS = {
    "counter": {"increment", "add"},
    "gauge": {"set", "increment", "decrement", "add", "subtract", "set_to_current_time"},
    "histogram": {"observe"},
    "summary": {"observe"},
}


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
        self.resource_created_at = Gauge(
            "resource_created_at_seconds",
            "Creation timestamp of reconciled objects",
            ["name", "namespace", "group", "version", "kind"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "ansible_operator_queue_depth", "Objects waiting for a worker", ["GVK"], registry=r
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
        self._user: dict[str, MetricWrapperBase] = {}

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
        """Apply one osdk_metric call. Raises ValueError on a bad payload."""
        name = payload.get("name")
        kind = payload.get("type")
        operation = payload.get("operation")
        if not isinstance(name, str) or not name:
            raise ValueError("metric payload needs a 'name'")
        if kind not in _USER_TYPES:
            raise ValueError(f"metric {name}: unknown type {kind!r}")
        if operation not in _OPERATIONS[kind]:
            raise ValueError(f"metric {name}: {kind} does not support {operation!r}")
        metric = self._user.get(name)
        if metric is None:
            metric = _USER_TYPES[kind](
                name, str(payload.get("description") or name), registry=self.registry
            )
            self._user[name] = metric
        elif metric._type != kind:  # type: ignore[attr-defined]
            raise ValueError(f"metric {name} is a {metric._type}, not a {kind}")  # type: ignore[attr-defined]
        value = payload.get("value")
        amount = float(value) if value is not None else 1.0
        match operation:
            case "increment" if kind == "counter":
                metric.inc()  # type: ignore[attr-defined]
            case "add" if kind == "counter":
                metric.inc(amount)  # type: ignore[attr-defined]
            case "set":
                metric.set(amount)  # type: ignore[attr-defined]
            case "increment":
                metric.inc()  # type: ignore[attr-defined]
            case "decrement":
                metric.dec()  # type: ignore[attr-defined]
            case "add":
                metric.inc(amount)  # type: ignore[attr-defined]
            case "subtract":
                metric.dec(amount)  # type: ignore[attr-defined]
            case "set_to_current_time":
                metric.set(time.time())  # type: ignore[attr-defined]
            case "observe":
                metric.observe(amount)  # type: ignore[attr-defined]

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
