"""annotation > watch > flag, in one place (settings/precedence.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ansible_operator.settings import AnsibleSettings, RunSettings
from ansible_operator.settings.precedence import Overrides, artifacts_kept, effective

FLAGS = RunSettings(reconcile_period=36000.0, run_timeout=3600.0, max_concurrent_reconciles=4)
ANSIBLE = AnsibleSettings(verbosity=2)


@dataclass(frozen=True)
class WatchSays:
    ansible_verbosity: int | None = None
    max_runner_artifacts: int = 20
    run_timeout: float | None = None
    reconcile_period: float | None = None
    max_concurrent_reconciles: int | None = None


def test_nothing_set_on_the_watch_or_object_gives_the_flags() -> None:
    settings = effective(WatchSays(), FLAGS, ANSIBLE)
    assert settings.verbosity == 2
    assert settings.reconcile_period == 36000.0
    assert settings.run_timeout == 3600.0
    assert settings.workers == 4
    assert settings.keep_artifacts == 20


def test_the_watch_wins_over_the_flags() -> None:
    watch = WatchSays(
        ansible_verbosity=5,
        run_timeout=60.0,
        reconcile_period=30.0,
        max_concurrent_reconciles=1,
        max_runner_artifacts=3,
    )
    settings = effective(watch, FLAGS, ANSIBLE)
    assert (settings.verbosity, settings.run_timeout, settings.reconcile_period) == (5, 60.0, 30.0)
    assert (settings.workers, settings.keep_artifacts) == (1, 3)


def test_the_annotation_wins_over_the_watch() -> None:
    watch = WatchSays(ansible_verbosity=5, reconcile_period=30.0, max_runner_artifacts=10)
    annotated = Overrides(verbosity=0, reconcile_period=5.0, max_runner_artifacts=2)
    settings = effective(watch, FLAGS, ANSIBLE, annotated)
    assert (settings.verbosity, settings.reconcile_period, settings.keep_artifacts) == (0, 5.0, 2)


def test_an_annotated_period_of_zero_means_no_periodic_run() -> None:
    watch = WatchSays(reconcile_period=30.0)
    assert effective(watch, FLAGS, ANSIBLE, Overrides(reconcile_period=0.0)).reconcile_period == 0


@pytest.mark.parametrize(
    ("annotated", "watch_keeps", "kept"),
    [(None, 20, None), (5, 20, 5), (50, 20, 20), (0, 20, 0), (7, None, 7)],
)
def test_an_annotation_may_lower_the_artifacts_kept_never_raise_them(
    annotated: int | None, watch_keeps: int | None, kept: int | None
) -> None:
    assert artifacts_kept(annotated, watch_keeps) == kept
    if watch_keeps is not None:
        over = Overrides(max_runner_artifacts=annotated)
        settings = effective(WatchSays(max_runner_artifacts=watch_keeps), FLAGS, ANSIBLE, over)
        assert settings.keep_artifacts == (watch_keeps if kept is None else kept)
