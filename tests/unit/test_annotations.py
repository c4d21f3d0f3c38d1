"""Per-object annotations: parsed, or an error naming the annotation."""

from __future__ import annotations

import pytest

from ansible_operator.reconciler.annotations import (
    MAX_RUNNER_ARTIFACTS,
    MIN_RECONCILE_PERIOD,
    PRIORITY,
    RECONCILE_PERIOD,
    VERBOSITY,
    AnnotationError,
    object_settings,
    queue_priority,
)


def annotated(**annotations: str) -> dict:
    return {"metadata": {"annotations": annotations}}


@pytest.mark.parametrize(
    ("value", "seconds"), [("30", 30.0), ("30s", 30.0), ("1m30s", 90.0), ("2h", 7200.0)]
)
def test_reconcile_period_takes_a_duration_or_bare_seconds(value: str, seconds: float) -> None:
    assert object_settings(annotated(**{RECONCILE_PERIOD: value})).reconcile_period == seconds


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (RECONCILE_PERIOD, "abc"),
        (RECONCILE_PERIOD, "-5s"),
        (VERBOSITY, "x"),
        (VERBOSITY, "9"),
        (MAX_RUNNER_ARTIFACTS, "-1"),
        (MAX_RUNNER_ARTIFACTS, "many"),
        (PRIORITY, "high"),
        (PRIORITY, "1.5"),
    ],
)
def test_bad_values_name_the_annotation_and_value(annotation: str, value: str) -> None:
    with pytest.raises(AnnotationError) as error:
        object_settings(annotated(**{annotation: value}))
    assert annotation in str(error.value)
    assert repr(value) in str(error.value)
    assert error.value.annotation == annotation


def test_absent_annotations_mean_defaults() -> None:
    settings = object_settings({"metadata": {}})
    assert (settings.reconcile_period, settings.verbosity, settings.max_runner_artifacts) == (
        None,
        None,
        None,
    )
    assert object_settings(annotated(**{VERBOSITY: "4"})).verbosity == 4


@pytest.mark.parametrize("value", ["0.001", "1ms", "500ms", "0.999"])
def test_a_reconcile_period_below_the_floor_is_raised_to_it_with_a_warning(value: str) -> None:
    # The attack: whoever may annotate an object runs it back to back.
    settings = object_settings(annotated(**{RECONCILE_PERIOD: value}))
    assert settings.reconcile_period == MIN_RECONCILE_PERIOD
    [warning] = settings.warnings
    assert RECONCILE_PERIOD in warning
    assert repr(value) in warning
    assert f"floor of {MIN_RECONCILE_PERIOD:g}s" in warning


def test_a_reconcile_period_at_the_floor_or_above_or_zero_is_kept_without_warning() -> None:
    # 0 means no periodic run at all, as in the reference: nothing to raise.
    for value, seconds in (("1s", 1.0), ("2s", 2.0), ("1.5", 1.5), ("0", 0.0), ("0s", 0.0)):
        settings = object_settings(annotated(**{RECONCILE_PERIOD: value}))
        assert (settings.reconcile_period, settings.warnings) == (seconds, ())


@pytest.mark.parametrize(
    ("value", "watch_keeps", "kept", "capped"),
    [
        ("5", 20, 5, False),  # lowered: the author's choice
        ("0", 20, 0, False),
        ("20", 20, 20, False),
        ("21", 20, 20, True),
        ("1000000", 20, 20, True),  # the attack: every run's artifacts, kept for ever
        ("3", 2, 2, True),
        ("7", None, 7, False),  # no watch to bound it (a caller that has none)
    ],
)
def test_max_runner_artifacts_may_lower_the_watchs_value_never_raise_it(
    value: str, watch_keeps: int | None, kept: int, capped: bool
) -> None:
    settings = object_settings(
        annotated(**{MAX_RUNNER_ARTIFACTS: value}), most_artifacts=watch_keeps
    )
    assert settings.max_runner_artifacts == kept
    if capped:
        [warning] = settings.warnings
        assert MAX_RUNNER_ARTIFACTS in warning and repr(value) in warning
        assert f"maxRunnerArtifacts ({watch_keeps}); {watch_keeps} are kept" in warning
    else:
        assert settings.warnings == ()


@pytest.mark.parametrize(("value", "used"), [("100", 100), (" -40 ", -40), ("0", 0)])
def test_a_priority_within_its_bounds_is_used_as_written(value: str, used: int) -> None:
    settings = object_settings(annotated(**{PRIORITY: value}))
    assert (settings.priority, settings.warnings) == (used, ())
    assert queue_priority(annotated(**{PRIORITY: value})) == used


@pytest.mark.parametrize(("value", "used"), [("1000000", 100), ("-101", -100)])
def test_a_priority_beyond_its_bounds_is_cut_to_them_with_a_warning(value: str, used: int) -> None:
    # Whoever may annotate an object ranks it with other objects' changes, not ahead.
    settings = object_settings(annotated(**{PRIORITY: value}))
    assert settings.priority == used
    [warning] = settings.warnings
    assert PRIORITY in warning and f"{used} is used" in warning
    assert queue_priority(annotated(**{PRIORITY: value})) == used


def test_the_queue_reads_a_bad_or_absent_priority_as_none() -> None:
    assert queue_priority(annotated(**{PRIORITY: "urgent"})) == 0  # its reconcile says why
    assert queue_priority({"metadata": {}}) == 0
    assert object_settings({"metadata": {}}).priority == 0
