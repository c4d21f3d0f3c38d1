"""Acceleration hit counters add up across forked processes, as the warm
runner's runs, workers and module runs count into one file."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_operator.runner.warm.hits import HitCounters


def test_counts_from_many_forks_add_up_and_reset_in_place(tmp_path: Path) -> None:
    counters = HitCounters.create(tmp_path / "hits", ["a", "b"])
    children = []
    for _ in range(8):
        pid = os.fork()
        if pid == 0:
            for _ in range(250):
                counters.count("a")
            counters.count("b", 3)
            counters.count("not-a-counter")
            os._exit(0)
        children.append(pid)
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    reader = HitCounters.open(tmp_path / "hits")
    assert reader.read() == {"a": 2000, "b": 24}
    counters.reset()
    assert reader.read() == {"a": 0, "b": 0}
    assert (tmp_path / "hits").stat().st_mode & 0o777 == 0o600


def test_a_process_that_closed_every_descriptor_counts_after_forgetting(tmp_path: Path) -> None:
    counters = HitCounters.create(tmp_path / "hits", ["a"])
    pid = os.fork()
    if pid == 0:
        os.closerange(3, 1 << 16)
        other = os.open(tmp_path / "elsewhere", os.O_RDWR | os.O_CREAT)  # may reuse the number
        counters.forget_descriptor()
        counters.count("a")
        os._exit(0 if os.fstat(other).st_size == 0 else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert counters.read() == {"a": 1}
