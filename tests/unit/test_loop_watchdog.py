"""The event-loop watchdog: a loop held by a callback is measured, exposed and
logged with where the loop was held."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from ansible_operator.observability.loop_watchdog import LoopWatchdog
from ansible_operator.observability.metrics import Metrics
from ansible_operator.testing.metrics import metric_value
from ansible_operator.testing.waiting import eventually

BLOCK = 0.6  # seconds: a real block (the watchdog is a thread on real time), kept short


def hold_the_loop_with_a_blocking_call() -> None:
    time.sleep(BLOCK)  # the attack: a callback that never yields


async def test_a_blocked_loop_is_measured_exposed_and_logged_with_its_culprit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="ansible_operator.loop")
    metrics = Metrics()
    watchdog = LoopWatchdog(metrics, interval=0.02, warn_after=0.2)
    watchdog.start()
    try:
        hold_the_loop_with_a_blocking_call()
        # The watchdog's heartbeat runs now that the loop is free: wait for its record.
        await asyncio.to_thread(
            eventually,
            lambda: metric(metrics, "ansible_operator_event_loop_blocked_seconds_max") >= 0.4,
            timeout=10,
            what="the block recorded",
        )
    finally:
        watchdog.stop()
    text = exposition(metrics)
    longest = metric_value(text, "ansible_operator_event_loop_blocked_seconds_max")
    assert BLOCK - 0.2 <= longest < BLOCK + 5
    assert metric_value(text, "ansible_operator_event_loop_blocked_seconds_total") >= longest
    assert metric_value(text, "ansible_operator_event_loop_lag_seconds_count") >= 1
    lines = [r.getMessage() for r in caplog.records]
    [during] = [line for line in lines if "so far" in line]
    assert "hold_the_loop_with_a_blocking_call" in during, during
    [after] = [line for line in lines if line.startswith("event loop was blocked")]
    assert f"seconds={longest:.1f}" in after


async def test_a_free_loop_counts_no_blocked_time() -> None:
    metrics = Metrics()
    watchdog = LoopWatchdog(metrics, interval=0.01)
    watchdog.start()
    try:
        await asyncio.to_thread(
            eventually,
            lambda: metric(metrics, "ansible_operator_event_loop_lag_seconds_count") >= 5,
            timeout=10,
            what="five heartbeats",
        )
    finally:
        watchdog.stop()
    # A busy test machine may delay a heartbeat; a free loop is never late by seconds.
    assert metric_value(exposition(metrics), "ansible_operator_event_loop_blocked_seconds_max") < 1


def exposition(metrics: Metrics) -> str:
    return metrics.exposition().decode()


def metric(metrics: Metrics, name: str) -> float:
    return metric_value(exposition(metrics), name)
