"""W3C Trace Context (https://www.w3.org/TR/trace-context/): a `traceparent`
value -> the caller's trace and span, or None.

An object's `traceparent` annotation (a GitOps tool's sync, a person's
`kubectl annotate`) makes its reconciles continue that trace. The value is
whoever may annotate the object's: it is parsed here, strictly, and only as
text (never templated, never logged whole); anything but a valid value is
ignored, as the specification asks of a receiver.

Pure: no OpenTelemetry import (tracing off must not load the SDK).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TRACEPARENT_ANNOTATION = "traceparent"
# version "00" is exactly 55 characters; a later version may append fields
# ("-..."), which a version-00 reader ignores. Longer than this: not a traceparent.
MAX_LENGTH = 512
_VERSION_00 = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_LATER_VERSION = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
SAMPLED = 0x01


@dataclass(frozen=True)
class RemoteParent:
    """The caller's span, which a reconcile's span becomes the child of."""

    trace_id: int  # 128 bits, never 0
    span_id: int  # 64 bits, never 0
    sampled: bool  # the caller recorded its trace: we do too (a parent-based sampler)

    @property
    def trace_id_hex(self) -> str:
        return f"{self.trace_id:032x}"


def parse_traceparent(value: object) -> RemoteParent | None:
    """`value` read as a W3C `traceparent`; None for anything that is not one
    (wrong type, length, case, all-zero ids, version ff)."""
    if not isinstance(value, str) or len(value) > MAX_LENGTH:
        return None
    value = value.strip(" \t")  # optional whitespace around a header's value
    if (match := _VERSION_00.fullmatch(value)) is not None:
        trace, span, flags = match.groups()
    elif (later := _LATER_VERSION.fullmatch(value)) is not None:
        version, trace, span, flags, _rest = later.groups()
        if version in ("00", "ff"):  # 00 has no more fields; ff is forbidden
            return None
    else:
        return None
    trace_id, span_id = int(trace, 16), int(span, 16)
    if not trace_id or not span_id:
        return None
    return RemoteParent(trace_id=trace_id, span_id=span_id, sampled=bool(int(flags, 16) & SAMPLED))


def annotated_parent(obj: Mapping[str, Any]) -> RemoteParent | None:
    """The trace an object's `traceparent` annotation names, if it names one."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    return parse_traceparent(annotations.get(TRACEPARENT_ANNOTATION))
