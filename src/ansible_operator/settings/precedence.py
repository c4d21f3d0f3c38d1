"""Which value an object's runs use: its annotation, else its watch's, else the operator's flag.

The one place this order lives. The reconciler asks `effective()` once per
reconcile (the run's plan and the requeue both read that answer), the manager for
the watches' workers; the annotation parser asks `artifacts_kept()`. (An object's
priority in the queue is no such choice: the watch's and the annotation's add up,
controller/priorities.py.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ansible_operator.settings.ansible import AnsibleSettings
from ansible_operator.settings.runs import RunSettings


class WatchDefaults(Protocol):
    """What a watch (watches.yaml, with its environment overrides) sets; None: not set."""

    @property
    def ansible_verbosity(self) -> int | None: ...
    @property
    def max_runner_artifacts(self) -> int: ...
    @property
    def run_timeout(self) -> float | None: ...
    @property
    def reconcile_period(self) -> float | None: ...
    @property
    def max_concurrent_reconciles(self) -> int | None: ...


@dataclass(frozen=True)
class Overrides:
    """An object's own settings, from its annotations (reconciler/annotations.py);
    None: not given."""

    reconcile_period: float | None = None
    verbosity: int | None = None
    max_runner_artifacts: int | None = None


NO_OVERRIDES = Overrides()


@dataclass(frozen=True)
class Effective:
    """The settings one object's runs use."""

    verbosity: int
    keep_artifacts: int  # 0: none kept after the run
    run_timeout: float | None  # None: never timed out
    reconcile_period: float  # after a success without requeue_after; 0: no periodic run
    workers: int  # the watch's concurrent reconciles


def artifacts_kept(annotated: int | None, watch_keeps: int | None) -> int | None:
    """The annotation may lower the watch's maxRunnerArtifacts, never raise it: whoever
    may annotate an object must not be able to fill the operator's disk."""
    if annotated is None or watch_keeps is None:
        return annotated
    return min(annotated, watch_keeps)


def effective(
    watch: WatchDefaults,
    runs: RunSettings,
    ansible: AnsibleSettings,
    overrides: Overrides = NO_OVERRIDES,
) -> Effective:
    verbosity = overrides.verbosity
    if verbosity is None:
        verbosity = watch.ansible_verbosity
    if verbosity is None:
        verbosity = ansible.verbosity
    keep = artifacts_kept(overrides.max_runner_artifacts, watch.max_runner_artifacts)
    period = overrides.reconcile_period  # 0 given here: no periodic run, as the reference
    if period is None:
        # A watch's reconcilePeriod of 0 reads as None: the flag's.
        period = watch.reconcile_period or runs.reconcile_period
    return Effective(
        verbosity=verbosity,
        keep_artifacts=watch.max_runner_artifacts if keep is None else keep,
        run_timeout=watch.run_timeout or runs.run_timeout,
        reconcile_period=period,
        workers=watch.max_concurrent_reconciles or runs.max_concurrent_reconciles,
    )
