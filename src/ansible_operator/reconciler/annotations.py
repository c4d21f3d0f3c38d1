"""Per-object settings from the reference's annotations, validated.

A bad value is an error naming the annotation and the value, so the object
gets a Failure condition and an Event saying what to fix.

A reconcile period below MIN_RECONCILE_PERIOD is raised to it, with a warning:
whoever may annotate an object must not be able to run it back to back
(`reconcile-period: 0.001` keeps a worker busy with one object for ever).
For the same reason `max-runner-artifacts` may lower the watch's
maxRunnerArtifacts, never raise it (the reference lets it do both: an author
could keep every run's artifacts and fill the operator's disk); a value above
is lowered to it, with a warning.

`priority` ranks the object in its controller's queue (controller/priorities.py):
a whole number added to what queued it. It is bounded (ANNOTATED_LOWEST to
ANNOTATED_HIGHEST) so that whoever may annotate an object can rank its lists and
periodic runs with other objects' changes, never ahead of them; a value beyond
is cut to the bound, with a warning. The manager's listener reads it as each
event arrives (`queue_priority`, which never raises: a bad value queues as 0 and
the reconcile reports it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.controller.priorities import ANNOTATED_HIGHEST, ANNOTATED_LOWEST
from ansible_operator.settings.precedence import Overrides, artifacts_kept
from ansible_operator.settings.runs import MIN_RECONCILE_PERIOD
from ansible_operator.values.durations import DurationError, parse_duration

PREFIX = "ansible.sdk.operatorframework.io/"
RECONCILE_PERIOD = PREFIX + "reconcile-period"
VERBOSITY = PREFIX + "verbosity"
MAX_RUNNER_ARTIFACTS = PREFIX + "max-runner-artifacts"
PRIORITY = PREFIX + "priority"

log = logging.getLogger("ansible_operator.controller")


class AnnotationError(ValueError):
    def __init__(self, annotation: str, value: str, expected: str) -> None:
        super().__init__(f"annotation {annotation}={value!r} is invalid: {expected}")
        self.annotation = annotation


@dataclass(frozen=True)
class ObjectSettings(Overrides):
    """The annotations' values (settings/precedence.py decides what they override)."""

    warnings: tuple[str, ...] = ()  # values used other than as written, said why
    priority: int = 0  # in the queue: added to the level of what queued it


def _int(annotations: Mapping[str, Any], key: str, low: int, high: int | None) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    text = str(raw).strip()
    expected = f"expected a whole number from {low}" + (f" to {high}" if high is not None else "")
    try:
        value = int(text)
    except ValueError:
        raise AnnotationError(key, str(raw), expected) from None
    if value < low or (high is not None and value > high):
        raise AnnotationError(key, str(raw), expected)
    return value


def object_settings(obj: Mapping[str, Any], *, most_artifacts: int | None = None) -> ObjectSettings:
    """`most_artifacts`: the most `max-runner-artifacts` may keep, the watch's
    maxRunnerArtifacts (None: no bound)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    warnings: list[str] = []
    period = _reconcile_period(obj, annotations, warnings)
    written = _int(annotations, MAX_RUNNER_ARTIFACTS, 0, None)
    artifacts = artifacts_kept(written, most_artifacts)
    if artifacts != written:
        warnings.append(
            f"annotation {MAX_RUNNER_ARTIFACTS}={annotations[MAX_RUNNER_ARTIFACTS]!r} is above "
            f"the watch's maxRunnerArtifacts ({most_artifacts}); {most_artifacts} are kept"
        )
        _log_adjusted(obj, MAX_RUNNER_ARTIFACTS, annotations[MAX_RUNNER_ARTIFACTS], most_artifacts)
    priority = _priority(annotations)
    if priority is not None and priority.used != priority.written:
        warnings.append(
            f"annotation {PRIORITY}={annotations[PRIORITY]!r} is beyond "
            f"{ANNOTATED_LOWEST}..{ANNOTATED_HIGHEST}; {priority.used} is used"
        )
        _log_adjusted(obj, PRIORITY, annotations[PRIORITY], priority.used)
    return ObjectSettings(
        reconcile_period=period,
        verbosity=_int(annotations, VERBOSITY, 0, 7),
        max_runner_artifacts=artifacts,
        warnings=tuple(warnings),
        priority=0 if priority is None else priority.used,
    )


@dataclass(frozen=True)
class _Priority:
    written: int
    used: int  # within the bounds


def _priority(annotations: Mapping[str, Any]) -> _Priority | None:
    raw = annotations.get(PRIORITY)
    if raw is None:
        return None
    try:
        written = int(str(raw).strip())
    except ValueError:
        raise AnnotationError(
            PRIORITY,
            str(raw),
            f"expected a whole number from {ANNOTATED_LOWEST} to {ANNOTATED_HIGHEST}",
        ) from None
    return _Priority(written, max(ANNOTATED_LOWEST, min(ANNOTATED_HIGHEST, written)))


def queue_priority(obj: Mapping[str, Any]) -> int:
    """What the object's annotation adds to its priority in the queue: 0 when it
    has none or a bad one (which its reconcile reports)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if PRIORITY not in annotations:
        return 0
    try:
        priority = _priority(annotations)
    except AnnotationError:
        return 0
    return 0 if priority is None else priority.used


def _reconcile_period(
    obj: Mapping[str, Any], annotations: Mapping[str, Any], warnings: list[str]
) -> float | None:
    period = None
    raw_period = annotations.get(RECONCILE_PERIOD)
    if raw_period is not None:
        try:
            # The reference needs a unit here; its docs promise a bare number is seconds.
            period = parse_duration(str(raw_period).strip(), bare_number_unit="s")
        except DurationError:
            raise AnnotationError(
                RECONCILE_PERIOD,
                str(raw_period),
                "expected a duration such as 30s, 5m or 1h30m, or a number of seconds",
            ) from None
        if period < 0:
            raise AnnotationError(RECONCILE_PERIOD, str(raw_period), "must not be negative")
        if 0 < period < MIN_RECONCILE_PERIOD:  # 0: no periodic run, as the reference
            warnings.append(
                f"annotation {RECONCILE_PERIOD}={str(raw_period)!r} is below the floor of "
                f"{MIN_RECONCILE_PERIOD:g}s; {MIN_RECONCILE_PERIOD:g}s is used"
            )
            _log_adjusted(obj, RECONCILE_PERIOD, raw_period, f"{MIN_RECONCILE_PERIOD:g}s")
            period = MIN_RECONCILE_PERIOD
    return period


def _log_adjusted(obj: Mapping[str, Any], annotation: str, value: object, used: object) -> None:
    metadata = obj.get("metadata") or {}
    log.warning(
        "annotation adjusted namespace=%s name=%s annotation=%s value=%r used=%s",
        metadata.get("namespace") or "",
        metadata.get("name"),
        annotation,
        str(value),
        used,
    )
