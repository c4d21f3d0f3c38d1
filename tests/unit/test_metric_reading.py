"""The tests' reading of an operator's metrics: the exposition the operator
itself produces, summed over the series a test names."""

from __future__ import annotations

from ansible_operator.observability.metrics import Metrics
from ansible_operator.testing.metrics import gvk_label, metric_value

GREETING = gvk_label("test.ansible-operator.io", "v1alpha1", "Greeting")
SECRET = gvk_label("", "v1", "Secret")


def exposition() -> str:
    metrics = Metrics()
    metrics.reconcile_result.labels(GREETING, "succeeded").inc(3)
    metrics.reconcile_result.labels(GREETING, "failed").inc()
    metrics.reconcile_result.labels(SECRET, "succeeded").inc()
    metrics.run_duration.labels(GREETING, "succeeded").observe(1.5)
    metrics.run_duration.labels(GREETING, "failed").observe(0.5)
    metrics.runs_in_flight.labels(GREETING).set(2)
    return metrics.exposition().decode()


def test_a_series_is_read_by_its_labels() -> None:
    text = exposition()
    result = "ansible_operator_reconcile_result_total"
    assert metric_value(text, result, GVK=GREETING, result="succeeded") == 3
    assert metric_value(text, result, GVK=GREETING, result="failed") == 1
    assert metric_value(text, "ansible_operator_runs_in_flight", GVK=GREETING) == 2


def test_series_matching_fewer_labels_are_summed() -> None:
    text = exposition()
    assert metric_value(text, "ansible_operator_reconcile_result_total", GVK=GREETING) == 4
    assert metric_value(text, "ansible_operator_reconcile_result_total") == 5
    runs = "ansible_operator_run_duration_seconds_count"
    assert metric_value(text, runs, GVK=GREETING) == 2


def test_a_series_never_incremented_reads_zero() -> None:
    text = exposition()
    assert metric_value(text, "ansible_operator_reconcile_result_total", GVK="x/v1/Y") == 0
    assert metric_value(text, "no_such_metric_total") == 0


def test_the_label_of_a_core_kind_names_the_core_group() -> None:
    assert SECRET == "core/v1/Secret"
    assert GREETING == "test.ansible-operator.io/v1alpha1/Greeting"


def test_a_label_called_name_is_a_label() -> None:
    metrics = Metrics()
    metrics.resource_created_at.labels("hello", "ns", "g", "v1", "Greeting").set(7)
    text = metrics.exposition().decode()
    assert metric_value(text, "resource_created_at_seconds", name="hello", namespace="ns") == 7
    assert metric_value(text, "resource_created_at_seconds", name="other") == 0
