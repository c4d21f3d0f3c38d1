"""A `traceparent` annotation continues the caller's trace when it is a valid
W3C Trace Context value, and is ignored (never an error) otherwise: whoever may
annotate the object writes it, so it is read strictly and only as text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_operator.observability.trace_context import (
    TRACEPARENT_ANNOTATION,
    RemoteParent,
    annotated_parent,
    parse_traceparent,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("value", "sampled"),
    [
        (f"00-{TRACE}-{SPAN}-01", True),
        (f"00-{TRACE}-{SPAN}-00", False),
        (f"00-{TRACE}-{SPAN}-09", True),  # other flags: only "sampled" is read
        (f" 00-{TRACE}-{SPAN}-01\t", True),  # whitespace around a header value
        (f"cc-{TRACE}-{SPAN}-01-what-a-later-version-adds", True),
        (f"01-{TRACE}-{SPAN}-01", True),
    ],
)
def test_a_valid_traceparent_names_the_callers_trace_and_span(value: str, sampled: bool) -> None:
    assert parse_traceparent(value) == RemoteParent(int(TRACE, 16), int(SPAN, 16), sampled)


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        "",
        "garbage",
        f"00-{TRACE}-{SPAN}",  # no flags
        f"00-{TRACE}-{SPAN}-01-",  # version 00 has nothing after the flags
        f"00-{TRACE.upper()}-{SPAN}-01",  # upper case is not allowed
        f"00-{'0' * 32}-{SPAN}-01",  # an all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # an all-zero span id
        f"ff-{TRACE}-{SPAN}-01",  # version ff is forbidden
        f"00-{TRACE[:-1]}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-1",
        "00-{{ lookup('pipe', 'id') }}-00f067aa0ba902b7-01",
        f"00-{TRACE}-{SPAN}-01" + "-x" * 300,  # over the length any version writes
        f"00_{TRACE}_{SPAN}_01",
    ],
)
def test_anything_else_is_ignored(value: object) -> None:
    assert parse_traceparent(value) is None


@given(st.text(max_size=120) | st.binary(max_size=60).map(lambda data: data.hex()))
def test_no_text_makes_the_parser_fail_and_what_it_accepts_is_well_formed(text: str) -> None:
    parent = parse_traceparent(text)
    if parent is not None:
        assert 0 < parent.trace_id < 2**128 and 0 < parent.span_id < 2**64
        assert parent.trace_id_hex in text


@given(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1), st.booleans())
def test_what_a_caller_writes_is_read_back(trace_id: int, span_id: int, sampled: bool) -> None:
    value = f"00-{trace_id:032x}-{span_id:016x}-{int(sampled):02x}"
    assert parse_traceparent(value) == RemoteParent(trace_id, span_id, sampled)


def test_the_annotation_of_an_object_is_read_and_its_absence_is_no_parent() -> None:
    value = f"00-{TRACE}-{SPAN}-01"
    assert annotated_parent({"metadata": {"annotations": {TRACEPARENT_ANNOTATION: value}}})
    assert annotated_parent({"metadata": {"annotations": {"other": value}}}) is None
    assert annotated_parent({"metadata": {"annotations": None}}) is None
    assert annotated_parent({"metadata": "odd"}) is None
    assert annotated_parent({}) is None
