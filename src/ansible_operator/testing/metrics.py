"""Reading an operator's Prometheus metrics, as a user's dashboard would."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def metric_value(exposition: str, name: str, /, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels`.

    `name` is the sample's name as exposed (`..._total` for a counter,
    `..._count` for a histogram's observations); no such sample is 0, as a
    counter that never moved is absent until its first increment.
    """
    return sum(
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def scrape(port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> str:
    """The exposition served at http://host:port/metrics (no authentication)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as response:
        return response.read().decode()


def gvk_label(group: str, version: str, kind: str) -> str:
    """The `GVK` label the operator puts on a watch's metrics."""
    return f"{group or 'core'}/{version}/{kind}"
