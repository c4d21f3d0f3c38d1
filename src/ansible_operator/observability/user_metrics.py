"""Users' metrics, from osdk_metric, as the Go operator handles and exposes them.

A payload is the original module's: ``{name, description, counter|gauge|
histogram|summary: {operation: value or null, ...}}``. The first payload of a
name creates the metric (no labels); operations follow Go's precedence.

Exposed through one prometheus_client collector so that names come out as Go
exposes them: a counter under exactly its name (prometheus_client's own
Counter would add ``_total`` and ``_created``), a histogram with Go's default
buckets, a summary without quantiles, no ``_created`` series.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

log = logging.getLogger("ansible_operator.metrics")

# client_golang's prometheus.DefBuckets.
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TYPES = ("counter", "gauge", "histogram", "summary")
# Go's mismatch messages name what the metric is; histograms and summaries
# are one kind there (both observe).
_KIND_NAMES = {
    "counter": "a counter",
    "gauge": "a gauge",
    "histogram": "a histogram or summary",
    "summary": "a histogram or summary",
}


class UserMetricError(ValueError):
    """A payload the operator refuses; the text is Go's, for playbooks that match on it."""


@dataclass
class UserMetric:
    name: str
    kind: str
    help: str
    exported: bool
    value: float = 0.0
    count: int = 0
    sum: float = 0.0
    bucket_counts: list[int] = field(default_factory=lambda: [0] * len(GO_DEFAULT_BUCKETS))

    def observe(self, amount: float) -> None:
        self.count += 1
        self.sum += amount
        for index, bound in enumerate(GO_DEFAULT_BUCKETS):
            if amount <= bound:
                self.bucket_counts[index] += 1

    def family(self) -> Metric:
        if self.kind == "counter":
            # prometheus_client prints a counter family as "<family>_total":
            # named so, a "..._total" counter comes out exactly as Go's. Any
            # other name keeps its exact sample name, typed untyped.
            if self.name.endswith("_total"):
                family = Metric(self.name[: -len("_total")], self.help, "counter")
            else:
                family = Metric(self.name, self.help, "unknown")
            family.add_sample(self.name, {}, self.value)
        elif self.kind == "gauge":
            family = Metric(self.name, self.help, "gauge")
            family.add_sample(self.name, {}, self.value)
        elif self.kind == "histogram":
            family = Metric(self.name, self.help, "histogram")
            for bound, cumulative in zip(GO_DEFAULT_BUCKETS, self.bucket_counts, strict=True):
                family.add_sample(self.name + "_bucket", {"le": _go_float(bound)}, cumulative)
            family.add_sample(self.name + "_bucket", {"le": "+Inf"}, self.count)
            family.add_sample(self.name + "_sum", {}, self.sum)
            family.add_sample(self.name + "_count", {}, self.count)
        else:
            family = Metric(self.name, self.help, "summary")
            family.add_sample(self.name + "_sum", {}, self.sum)
            family.add_sample(self.name + "_count", {}, self.count)
        return family


class UserMetrics(Collector):
    """The metrics osdk_metric created, served through ``registry``, and how
    to apply one payload.

    A user metric whose names the registry's other metrics (or an earlier user
    metric) already expose is, as in Go, kept but not exported, and logged.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._metrics: dict[str, UserMetric] = {}
        self._hidden = False
        registry.register(self)

    def describe(self) -> Iterable[Metric]:
        # Names come and go with payloads: nothing for the registry to check at registration.
        return []

    def collect(self) -> Iterator[Metric]:
        if self._hidden:
            return
        for metric in self._metrics.values():
            if metric.exported:
                yield metric.family()

    def apply(self, payload: Mapping[str, Any]) -> None:
        """Apply one osdk_metric payload. Raises UserMetricError with Go's text."""
        given = [kind for kind in TYPES if payload.get(kind) is not None]
        if len(given) > 1:
            raise UserMetricError("only one metric can be processed at a time")
        if not given:
            raise UserMetricError("a request should contain at least one metric")
        kind = given[0]
        spec = payload[kind]
        if not isinstance(spec, Mapping):
            raise UserMetricError(f"{kind} must be an object, not {spec!r}")
        name = str(payload.get("name") or "")
        # Created before the operation is checked, as in Go: a refused
        # operation still leaves the metric in place.
        metric = self._metrics.get(name) or self._create(name, kind, payload)
        if _family_of(metric.kind) != _family_of(kind):
            raise UserMetricError(
                f"cannot change metric type of {name}, which is {_KIND_NAMES[metric.kind]}"
            )
        if metric.kind == "counter":
            _count(metric, spec)
        elif metric.kind == "gauge":
            _gauge(metric, spec)
        else:
            metric.observe(_number(spec, "observe"))

    def _create(self, name: str, kind: str, payload: Mapping[str, Any]) -> UserMetric:
        help_text = str(payload.get("description") or name)
        metric = UserMetric(name=name, kind=kind, help=help_text, exported=True)
        problem = self._export_problem(metric)
        if problem:
            metric.exported = False
            log.warning("user metric not exported metric=%s reason=%r", name, problem)
        else:
            log.info("registering user metric metric=%s type=%s", name, kind)
        self._metrics[name] = metric
        return metric

    def _export_problem(self, metric: UserMetric) -> str:
        try:
            family = metric.family()
        except ValueError as error:
            return str(error)
        taken: set[str] = set()
        self._hidden = True  # the registry's other metrics only
        try:
            for other in self._registry.collect():
                taken |= exposed_names(other)
        finally:
            self._hidden = False
        for other in self._metrics.values():
            if other.exported:
                taken |= exposed_names(other.family())
        clash = sorted(exposed_names(family) & taken)
        if clash:
            return f"{', '.join(clash)} already exposed by another metric"
        return ""


def exposed_names(family: Metric) -> set[str]:
    """Every name a family can put in the exposition, samples or not yet."""
    if family.type == "counter":  # printed as "<name>_total", never "<name>"
        names = {family.name + "_total", family.name + "_created"}
    else:
        suffixes = {
            "histogram": ("_bucket", "_count", "_sum", "_created"),
            "summary": ("_count", "_sum", "_created"),
            "info": ("_info",),
        }.get(family.type, ())
        names = {family.name, *(family.name + suffix for suffix in suffixes)}
    names.update(sample.name for sample in family.samples)
    return names


def _family_of(kind: str) -> str:
    return "observer" if kind in ("histogram", "summary") else kind


def _number(spec: Mapping[str, Any], key: str) -> float:
    """A float from the spec; unset (null) is 0, as Go decodes it."""
    value = spec.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserMetricError(f"{key} must be a number, not {value!r}")
    return float(value)


def _flag(spec: Mapping[str, Any], key: str) -> bool:
    value = spec.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise UserMetricError(f"{key} must be true or false, not {value!r}")
    return value


def _count(metric: UserMetric, spec: Mapping[str, Any]) -> None:
    if _flag(spec, "increment"):
        metric.value += 1
        return
    amount = _number(spec, "add")
    if amount < 0:
        raise UserMetricError("counter metrics cannot decrease in value")
    metric.value += amount


def _gauge(metric: UserMetric, spec: Mapping[str, Any]) -> None:
    """The first that applies of increment, decrement, add, subtract, set,
    set_to_current_time; zeros do not apply (so a gauge cannot be set to 0)."""
    if _flag(spec, "increment"):
        metric.value += 1
    elif _flag(spec, "decrement"):
        metric.value -= 1
    elif amount := _number(spec, "add"):
        metric.value += amount
    elif amount := _number(spec, "subtract"):
        metric.value -= amount
    elif amount := _number(spec, "set"):
        metric.value = amount
    elif _flag(spec, "set_to_current_time"):
        metric.value = time.time()


def _go_float(value: float) -> str:
    """A float as Go's strconv.FormatFloat(v, 'g', -1, 64) writes a bucket bound."""
    return format(value, "g")
