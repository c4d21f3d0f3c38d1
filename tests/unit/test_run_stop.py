"""Stopping the run of an object that is gone: which events stop it, how the
controller ends that reconcile (nothing reported, nothing requeued), and that
a stop requested before the run starts starts nothing. The processes really
killed: tests/security/test_deleted_object_run.py."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.controller.controller import Controller
from ansible_operator.controller.handlers import run_stop_reason
from ansible_operator.controller.reconcile import ObjectKey, Outcome
from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner import rundir, stopping
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.process import RunSpec, execute

KEY = ObjectKey("team", "mc")
OURS = "cache.example.com/finalizer"


def obj(*, deleting: bool = False, finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "mc", "namespace": "team", "finalizers": list(finalizers)}
    if deleting:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": metadata}


@pytest.mark.parametrize(
    ("event", "new", "finalizer", "stops"),
    [
        ("DELETED", None, None, "the object was deleted"),
        ("DELETED", None, OURS, "the object was deleted"),
        ("MODIFIED", obj(deleting=True), None, "no finalizer of this operator"),
        ("MODIFIED", obj(deleting=True, finalizers=("someone.else/keep",)), OURS, "no finalizer"),
        ("MODIFIED", obj(deleting=True, finalizers=(OURS,)), OURS, None),  # its finalizer runs
        ("MODIFIED", obj(), None, None),
        ("ADDED", obj(), OURS, None),
    ],
)
def test_a_deletion_stops_the_run_unless_a_finalizer_of_ours_is_to_run(
    event: str, new: dict[str, Any] | None, finalizer: str | None, stops: str | None
) -> None:
    reason = run_stop_reason(event, new, finalizer)
    if stops is None:
        assert reason is None
    else:
        assert reason is not None and stops in reason


class RunUntilStopped:
    """A reconcile whose run goes on until it is stopped, as execute's does."""

    def __init__(self) -> None:
        self.running = asyncio.Event()
        self.ended = asyncio.Event()
        self.calls = 0

    async def reconcile(self, key: ObjectKey) -> Outcome:
        self.calls += 1
        stop = stopping.current()
        assert stop is not None, "the controller makes a stop current around each reconcile"
        self.running.set()
        try:
            await stop.wait()
            raise stopping.RunStopped(stop.reason, "7-abc")
        finally:
            self.ended.set()


async def test_a_stopped_run_ends_its_reconcile_with_nothing_requeued(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ansible_operator.controller")
    reconciler = RunUntilStopped()
    controller = Controller("g/v1/K", "Memcached", reconciler, workers=1, metrics=Metrics())
    controller.start()
    controller.enqueue(KEY)
    await asyncio.wait_for(reconciler.running.wait(), 5)
    controller.stop_run(ObjectKey("team", "other"), "not this one")  # not in flight: nothing
    controller.stop_run(KEY, "the object was deleted")
    await asyncio.wait_for(reconciler.ended.wait(), 5)
    for _ in range(3):
        await asyncio.sleep(0)  # the worker follows the outcome
    assert controller.queue.processing == 0
    assert "run cancelled kind=Memcached namespace=team name=mc run=7-abc" in caplog.text
    assert "reconcile crashed" not in caplog.text
    assert controller.queue.pending_delay(KEY) is None and len(controller.queue) == 0
    assert controller.queue.backoff.failures(KEY) == 0
    assert reconciler.calls == 1
    controller.stop_run(KEY, "after the reconcile: nothing to stop, nothing raised")
    await controller.stop(0)


async def test_a_stop_requested_before_the_run_starts_starts_nothing(tmp_path: Path) -> None:
    run_dir = rundir.prepare(tmp_path / "obj", extravars={}, envvars={}, kubeconfig=None)
    # No role: a run that started would fail to build its command line.
    spec = RunSpec(run_dir=run_dir, role=None, playbook=None, ident="1-stopped")
    stop = stopping.RunStop()
    stop.request("the object was deleted")
    with stopping.stoppable(stop), pytest.raises(stopping.RunStopped) as stopped:
        await execute(spec, RunSummary())
    assert stopped.value.reason == "the object was deleted"
    assert stopped.value.ident == ""
    assert not list(run_dir.artifacts.iterdir())
