"""Per-object settings from the reference's annotations, validated.

A bad value is an error naming the annotation and the value, so the object
gets a Failure condition and an Event saying what to fix.

A reconcile period below MIN_RECONCILE_PERIOD is raised to it, with a warning:
whoever may annotate an object must not be able to run it back to back
(`reconcile-period: 0.001` keeps a worker busy with one object for ever).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.durations import DurationError, parse_duration
from ansible_operator.options import MIN_RECONCILE_PERIOD

PREFIX = "ansible.sdk.operatorframework.io/"
RECONCILE_PERIOD = PREFIX + "reconcile-period"
VERBOSITY = PREFIX + "verbosity"
MAX_RUNNER_ARTIFACTS = PREFIX + "max-runner-artifacts"

log = logging.getLogger("ansible_operator.controller")


class AnnotationError(ValueError):
    def __init__(self, annotation: str, value: str, expected: str) -> None:
        super().__init__(f"annotation {annotation}={value!r} is invalid: {expected}")
        self.annotation = annotation


@dataclass(frozen=True)
class ObjectSettings:
    reconcile_period: float | None = None
    verbosity: int | None = None
    max_runner_artifacts: int | None = None
    warnings: tuple[str, ...] = ()  # values used other than as written, said why


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


def object_settings(obj: Mapping[str, Any]) -> ObjectSettings:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    period = None
    warnings: list[str] = []
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
            metadata = obj.get("metadata") or {}
            log.warning(
                "reconcile period raised namespace=%s name=%s annotation=%s value=%r floor=%gs",
                metadata.get("namespace") or "",
                metadata.get("name"),
                RECONCILE_PERIOD,
                str(raw_period),
                MIN_RECONCILE_PERIOD,
            )
            period = MIN_RECONCILE_PERIOD
    return ObjectSettings(
        reconcile_period=period,
        verbosity=_int(annotations, VERBOSITY, 0, 7),
        max_runner_artifacts=_int(annotations, MAX_RUNNER_ARTIFACTS, 0, None),
        warnings=tuple(warnings),
    )
