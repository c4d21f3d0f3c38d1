"""pytest plugin of bench/test_cost.py: each test's CPU (its cgroup's usage, read
before and after its setup, call and teardown) and wall time, written as JSON."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

USAGE = Path(os.environ["TEST_COST_USAGE"])
RECORDS: list[dict[str, object]] = []


def cpu_seconds() -> float:
    text = USAGE.read_text()
    if USAGE.name == "cpu.stat":  # cgroup v2: usage_usec
        fields = dict(line.split() for line in text.splitlines())
        return int(fields["usage_usec"]) / 1e6
    return int(text) / 1e9  # cgroup v1 cpuacct.usage: nanoseconds


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    cpu, wall = cpu_seconds(), time.monotonic()
    yield
    RECORDS.append(
        {"test": item.nodeid, "cpu": cpu_seconds() - cpu, "wall": time.monotonic() - wall}
    )


def pytest_sessionfinish() -> None:
    Path(os.environ["TEST_COST_OUT"]).write_text(json.dumps(RECORDS))
