"""What the operator logs about admissions and refusals stays bounded whatever the
traffic: summaries with counts, not a line per request."""

from __future__ import annotations

import itertools
import logging

import pytest

from ansible_operator.serving.http_limits import ThrottledWarning
from ansible_operator.webhooks.admission_log import AdmissionSummary


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_refusal_warning_is_one_line_per_interval_however_many_refusals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    warning = ThrottledWarning(logging.getLogger("test.throttled"), interval=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.throttled"):
        for refused in range(1, 100_001):
            clock.now += 0.001  # 100 seconds of 1000 refusals a second
            warning.warning("refused=%d", refused)
    counts = [int(record.getMessage().removeprefix("refused=")) for record in caplog.records]
    assert len(counts) == 10
    # The running count in each line says how many were held back since the last.
    assert counts[0] == 1
    assert all(abs(later - earlier - 10_000) <= 1 for earlier, later in itertools.pairwise(counts))


def test_a_summary_counts_each_webhooks_decisions_then_starts_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summary = AdmissionSummary(interval=60)
    for _ in range(5000):
        summary.record("check.example.com", "allowed", patched=False)
    summary.record("check.example.com", "denied", patched=False)
    summary.record("rewrite.example.com", "allowed", patched=True)
    summary.record("rewrite.example.com", "policy", patched=False)

    with caplog.at_level(logging.INFO, logger="ansible_operator.webhooks"):
        lines = summary.flush()
    assert lines == [
        "admissions in the last 60s webhook=check.example.com allowed=5000 denied=1 "
        "by_policy=0 patched=0",
        "admissions in the last 60s webhook=rewrite.example.com allowed=1 denied=0 "
        "by_policy=1 patched=1",
    ]
    assert [record.getMessage() for record in caplog.records] == lines
    assert summary.flush() == []  # nothing decided since: nothing said
