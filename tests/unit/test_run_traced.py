"""RunnerHost with tracing on: each run is a span, the child of the reconcile's,
whatever way it ends; its tasks are built from the events it posts, through its
redactor; what it waited for before it could start is shown; the proxy is given
its trace. The process itself is faked (tests/integration/test_traces.py runs it)."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import pytest
from recorded_spans import RecordingTracer
from test_run_play import TOKEN, Grants, plan_in, post_event

from ansible_operator.observability.metrics import Metrics
from ansible_operator.observability.tracing import Tracing
from ansible_operator.runner import fake
from ansible_operator.runner import host as host_module
from ansible_operator.runner import run_trace as run_trace_module
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.event_plugin import TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.host import RunnerHost
from ansible_operator.runner.process import RunSpec
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.run_trace import RunTrace
from ansible_operator.settings import RunSettings, Settings


class TracedGrants(Grants):
    """The proxy's side: which trace each grant was given."""

    def __init__(self) -> None:
        super().__init__()
        self.traces: list[RunTrace] = []

    def grant(self, owner: Any, **how: Any) -> RunAccess:
        access = super().grant(owner, **how)
        access.traced = self.traces.append
        return access


def stamp(moment: datetime.datetime) -> str:
    return moment.isoformat()


def task_events(name: str) -> list[dict[str, Any]]:
    start = datetime.datetime.now(datetime.UTC)
    end = start + datetime.timedelta(milliseconds=30)
    data = {"task": name, "task_uuid": "t-1", "host": "localhost", "task_path": "/r/main.yml:3"}
    return [
        {"event": "runner_on_start", "created": stamp(start), "event_data": data},
        {
            "event": "runner_on_ok",
            "created": stamp(end),
            "event_data": {**data, "start": stamp(start), "end": stamp(end), "res": {}},
        },
    ]


@pytest.fixture
async def traced_host(tmp_path: Path) -> Any:
    tracer = RecordingTracer()
    host = RunnerHost(
        settings=Settings(runs=RunSettings(runner_mode="reference")),
        access=TracedGrants(),
        runner_root=tmp_path / "runs",
        scratch=tmp_path,
        metrics=Metrics(),
        max_runs=1,
        contain=False,
        tracing=Tracing(tracer),
    )
    await host.start()
    yield host, tracer
    await host.stop()


async def test_a_run_is_the_child_of_the_current_span_with_its_tasks_redacted(
    traced_host: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, tracer = traced_host

    async def plays_one_task(spec: RunSpec, summary: RunSummary, **_: Any) -> RunResult:
        for event in [*task_events(f"Log in with {TOKEN}"), *fake.succeeded().events]:
            assert await post_event(host.receiver, spec.env[TOKEN_ENV], event) == 204
        return RunResult.of(summary, ident=spec.ident, status="successful")

    monkeypatch.setattr(host_module, "execute", plays_one_task)
    reconcile = tracer.start("reconcile ConfigMap", parent=None, attributes={})
    with Tracing.current_span(reconcile):
        result = await host.run(plan_in(tmp_path / "runs"))

    assert result.succeeded
    run = tracer.named("ansible run")
    assert run.parent is reconcile and run.ended and run.error is None
    assert run.attributes["ansible.run.status"] == "successful"
    assert run.attributes["ansible.run.mode"] == "reference"
    assert run.attributes["ansible.role"] == "cm"
    [task] = tracer.children(run)
    # The run's proxy credential is a secret of the run: never in its spans.
    assert task.name == "Log in with <redacted>"
    [given] = host.access.traces  # what the proxy puts the run's requests in
    assert given.span is run


async def test_a_run_that_waited_for_its_slot_says_so_and_a_cancelled_one_ends(
    traced_host: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, tracer = traced_host
    monkeypatch.setattr(run_trace_module, "WAIT_SHOWN_NS", 0)  # however short the wait
    started = asyncio.Event()

    async def never_ends(spec: RunSpec, summary: RunSummary, **_: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(host_module, "execute", never_ends)
    queued = asyncio.Event()  # a run waits for the slot
    slots, acquire = host._run_slots, host._run_slots._acquire

    async def noting_acquire(priority: int) -> None:
        if slots.free == 0:  # none free: this run waits for the first's
            queued.set()
        await acquire(priority)

    monkeypatch.setattr(slots, "_acquire", noting_acquire)
    first = asyncio.ensure_future(host.run(plan_in(tmp_path / "runs")))
    await asyncio.wait_for(started.wait(), 10)
    second = asyncio.ensure_future(host.run(plan_in(tmp_path / "runs")))
    await asyncio.wait_for(queued.wait(), 10)
    first.cancel()  # the slot goes to the second, which then runs for ever too
    second.cancel()
    for run in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await run

    runs = [span for span in tracer.spans if span.name == "ansible run"]
    assert all(run.ended for run in runs)
    assert [run.attributes["ansible.run.status"] for run in runs] == ["stopped", "stopped"]
    for run in runs:
        assert [child.name for child in tracer.children(run)] == [
            "wait for the runner",
            "wait for a run slot",  # the second's lasted until the first was cancelled
        ]
