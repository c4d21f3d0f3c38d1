"""WarmKeeper: a warm runner that exits is replaced, one that keeps exiting is
replaced more slowly, and stopping the operator is not an exit to recover
from. Fake processes: the real kill is tests/integration/test_warm_runner_replaced.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from ansible_operator.runner.warm import keeper
from ansible_operator.runner.warm.keeper import WarmKeeper, describe_exit, restart_delay
from ansible_operator.runner.warm.processes import WarmProcesses

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime


class FakeProcess:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.killed = False
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def exit(self, code: int) -> None:
        self._exit.set_result(code)

    def kill(self) -> None:
        self.killed = True
        if not self._exit.done():
            self._exit.set_result(-9)

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)


def fake_warm(process: FakeProcess) -> WarmProcesses:
    return WarmProcesses(None, Path("runs.sock"), cast(Any, process), {}, Path("hits"))


class Starts:
    """Each start makes a new fake warm runner; the test reads them back."""

    def __init__(self) -> None:
        self.processes: list[FakeProcess] = []
        self.gone: list[int] = []

    async def start(self) -> WarmProcesses:
        process = FakeProcess(1000 + len(self.processes))
        self.processes.append(process)
        return fake_warm(process)

    def replaced(self, warm: WarmProcesses) -> None:
        self.gone.append(warm.process.pid)


YIELD = asyncio.sleep  # the real one: a test below stubs the keeper's delays


async def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(1000):
        if condition():
            return
        await YIELD(0)
    raise AssertionError(f"never: {what}")


async def test_an_exited_warm_runner_is_replaced_and_runs_get_its_successor() -> None:
    starts = Starts()
    warm_keeper = WarmKeeper(starts.start, starts.replaced)
    warm_keeper.begin()
    first = await warm_keeper.current()
    assert first is not None and first.process.pid == 1000

    starts.processes[0].exit(-9)
    await _until(lambda: len(starts.processes) == 2, "a second warm runner started")
    second = await warm_keeper.current()
    assert second is not None and second.process.pid == 1001
    assert starts.gone == [1000]

    await warm_keeper.stop()
    assert starts.processes[1].killed
    assert len(starts.processes) == 2, "stopping started another warm runner"


async def test_a_warm_runner_exiting_again_soon_waits_longer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(keeper.asyncio, "sleep", sleep)
    starts = Starts()
    warm_keeper = WarmKeeper(starts.start, starts.replaced)
    warm_keeper.begin()
    for exits in range(1, 5):
        await warm_keeper.current()
        starts.processes[-1].exit(1)
        await _until(lambda n=exits: len(starts.processes) == n + 1, "the next warm runner")
    await warm_keeper.stop()
    assert slept == [1.0, 2.0, 4.0]  # the first exit is restarted at once


def test_restart_delays_grow_to_a_minute() -> None:
    assert [restart_delay(n) for n in (1, 2, 3, 4)] == [0.0, 1.0, 2.0, 4.0]
    assert restart_delay(40) == 60.0


def test_exits_are_described_as_an_operator_reads_them() -> None:
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(2) == "exit code 2"
