"""Acceleration task-inline: a task run in the playbook's process plays as a
forked one. One playbook of every kind of task (task_inline_project/compat.yml)
is played by a warm runner with the acceleration switched off (Ansible forks a
worker per task) and by one with it on; their stdout and every callback event
they send must be the same, but for what differs between any two runs (ids,
times, process ids). What only the fork contained: a plugin that ends its
process fails its task, not the run; a task that hangs is stopped with its run.
Both ways, a play's vars_prompt ends the run at once, naming the variable.
Real ansible-runner and ansible-core, no cluster."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from warm_play import play_warm, start_warm

from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.warm.accelerations.task_inline import NAME
from ansible_operator.runner.warm.processes import WarmProcesses

PROJECT = Path(__file__).parent / "task_inline_project"
FORKED = "worker-gc-freeze"  # counts the workers Ansible forks

# What differs between any two runs of one playbook, whoever runs its tasks.
VOLATILE_KEYS = {
    "uuid",
    "parent_uuid",
    "created",
    "pid",
    "runner_ident",
    "task_uuid",
    "play_uuid",
    "playbook_uuid",
    "start",
    "end",
    "delta",
    "duration",
    "ansible_job_id",
    "results_file",
    "started",  # wait_for's and async's start time (async_status: 1)
    "elapsed",
    "_original_basename",  # copy's content, in a temporary file of a random name
}
VOLATILE_TEXT = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\bj\d+\.\d+\b"), "<job>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?"), "<time>"),
    (re.compile(r"\b\d+\.\d+ seconds?\b"), "<seconds>"),
    (re.compile(r"\b\d+:\d\d:\d\d\.\d+\b"), "<duration>"),
    (re.compile(r"ansible-tmp-[\w.-]+"), "ansible-tmp-<tmp>"),
    (re.compile(r"\belapsed\b\W+\d+"), "elapsed <n>"),
    (re.compile(r"\b0x[0-9a-f]+\b"), "<address>"),  # 2.18's timeout names the frames
)


@pytest.fixture
async def warm_stock(tmp_path: Path) -> AsyncIterator[WarmProcesses]:
    warm = await _start(tmp_path / "stock", switched_off=(NAME,))
    yield warm
    await warm.stop()


@pytest.fixture
async def warm_inline(tmp_path: Path) -> AsyncIterator[WarmProcesses]:
    warm = await _start(tmp_path / "inline")
    assert warm.accelerations[NAME].on, warm.accelerations[NAME].why
    yield warm
    await warm.stop()


async def _start(where: Path, switched_off: tuple[str, ...] = ()) -> WarmProcesses:
    target = {"playbook": str(PROJECT / "compat.yml")}
    return await start_warm(where / "scratch", target, switched_off)


class Played:
    def __init__(self, result: RunResult, stdout: str, events: list[dict[str, Any]]) -> None:
        self.result, self.stdout, self.events = result, stdout, events

    def normalized(self, where: Path) -> tuple[str, list[Any]]:
        def text(value: str) -> str:
            value = value.replace(str(where), "<dir>")
            for pattern, replacement in VOLATILE_TEXT:
                value = pattern.sub(replacement, value)
            return value

        def walk(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items() if k not in VOLATILE_KEYS}
            if isinstance(value, list):
                return [walk(v) for v in value]
            return text(value) if isinstance(value, str) else value

        return text(self.stdout), [walk(event) for event in self.events]


async def play(
    receiver: EventReceiver,
    warm: WarmProcesses,
    where: Path,
    playbook: str,
    run_timeout: float = 300,
    extravars: dict[str, Any] | None = None,
) -> Played:
    events: list[dict[str, Any]] = []
    out_dir = where / "out"
    out_dir.mkdir(parents=True)
    result, run_dir = await play_warm(
        receiver,
        warm,
        where / "run",
        playbook=PROJECT / playbook,
        extravars={"out_dir": str(out_dir), **(extravars or {})},
        verbosity=1,
        run_timeout=run_timeout,
        on_event=lambda event: events.append(dict(event)),
    )
    stdout_file = run_dir.artifacts / result.ident / "stdout"
    stdout = stdout_file.read_text() if stdout_file.exists() else ""
    events.sort(key=lambda event: event.get("counter", 0))
    return Played(result, stdout, events)


def _first_difference(inline: Any, stock: Any, path: str = "") -> str:
    """Where two events differ first, for the failure's message."""
    if isinstance(inline, dict) and isinstance(stock, dict):
        for key in sorted(set(inline) | set(stock)):
            if inline.get(key, "<absent>") != stock.get(key, "<absent>"):
                return _first_difference(
                    inline.get(key, "<absent>"), stock.get(key, "<absent>"), f"{path}.{key}"
                )
    if isinstance(inline, list) and isinstance(stock, list) and len(inline) == len(stock):
        for index, (a, b) in enumerate(zip(inline, stock, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{index}]")
    return f"{path}: inline {inline!r}, stock {stock!r}"


def _tasks(played: Played, kind: str, name: Callable[[str], bool]) -> list[dict[str, Any]]:
    return [
        e
        for e in played.events
        if e.get("event") == kind and name(str(e.get("event_data", {}).get("task", "")))
    ]


async def test_a_task_in_the_playbook_process_plays_as_a_forked_one(
    receiver: EventReceiver,
    tmp_path: Path,
    warm_stock: WarmProcesses,
    warm_inline: WarmProcesses,
) -> None:
    stock = await play(receiver, warm_stock, tmp_path / "stock", "compat.yml")
    inline = await play(receiver, warm_inline, tmp_path / "inline", "compat.yml")

    # The play ends as written: its last play's any_errors_fatal stops the run.
    for played in (stock, inline):
        assert not played.result.succeeded
        assert "tagged always" in played.stdout and "tagged never" not in played.stdout
        assert "the handler ran" in played.stdout and "rescued rc=1" in played.stdout
        assert "a secret" not in played.stdout
        assert "templated" not in played.stdout.replace("echo templated", "")
        assert _tasks(played, "runner_on_failed", lambda t: t == "a task over its timeout")
    assert (tmp_path / "inline" / "out" / "diffed.txt").read_text() == "diffed 3\n"
    assert not (tmp_path / "inline" / "out" / "not-written.txt").exists()

    stock_stdout, stock_events = stock.normalized(tmp_path / "stock")
    inline_stdout, inline_events = inline.normalized(tmp_path / "inline")
    assert inline_stdout == stock_stdout
    # The callbacks a worker sends from inside its task, compared below with the rest.
    assert {e.get("event") for e in inline_events} >= {
        "runner_item_on_ok",
        "runner_retry",
        "runner_on_file_diff",
        "runner_on_async_ok",
        "playbook_on_include",
        "playbook_on_notify",
        "runner_on_skipped",
    }
    assert [e.get("event") for e in inline_events] == [e.get("event") for e in stock_events]
    for inline_event, stock_event in zip(inline_events, stock_events, strict=True):
        assert inline_event == stock_event, _first_difference(inline_event, stock_event)

    stock_hits, inline_hits = warm_stock.hits(), warm_inline.hits()
    assert stock_hits[NAME] == 0
    assert inline_hits[NAME] > 0
    # The batch of two hosts still forks a worker per host and task (2 x 2);
    # everything else ran in the playbook's process.
    assert inline_hits[FORKED] == 4
    assert stock_hits[FORKED] > inline_hits[NAME]


async def test_a_plugin_that_ends_its_process_fails_its_task_not_the_run(
    receiver: EventReceiver, tmp_path: Path, warm_inline: WarmProcesses
) -> None:
    played = await play(receiver, warm_inline, tmp_path / "crash", "crash.yml")
    assert played.result.succeeded, played.result.message
    failed = _tasks(played, "runner_on_failed", lambda t: t == "a plugin that ends its process")
    assert len(failed) == 1
    assert "the task's plugin ended its worker: SystemExit(4)" in played.stdout
    assert "rescued: " in played.stdout and "the play goes on" in played.stdout


async def test_a_task_hanging_in_the_playbook_process_is_stopped_with_its_run(
    receiver: EventReceiver, tmp_path: Path, warm_inline: WarmProcesses
) -> None:
    played = await play(receiver, warm_inline, tmp_path / "hang", "hang.yml", run_timeout=3)
    # The pause asked for 600 s; the run was stopped at its timeout instead,
    # in the task, with nothing of it left running.
    assert played.result.status == "timeout", played.result
    assert played.result.last_task.startswith("a task that waits"), played.result
    assert warm_inline.hits()[NAME] > 0
    assert not _tasks(played, "runner_on_ok", lambda t: t.startswith("a task that waits"))


@pytest.mark.parametrize("accelerated", [False, True], ids=["forked", "inline"])
async def test_a_vars_prompt_is_refused_at_once_unless_its_variable_is_given(
    receiver: EventReceiver, tmp_path: Path, accelerated: bool
) -> None:
    warm = await _start(tmp_path / "warm", switched_off=() if accelerated else (NAME,))
    try:
        asked = await play(receiver, warm, tmp_path / "asked", "prompt.yml", run_timeout=120)
        given = await play(
            receiver, warm, tmp_path / "given", "prompt.yml", extravars={"answer": "forty-two"}
        )
    finally:
        await warm.stop()
    # Not left waiting for an answer until the run's timeout: refused, named.
    assert asked.result.status == "error", asked.result
    assert "vars_prompt asks for 'answer' ('What is the answer')" in asked.result.reason
    assert "give answer in the object's spec" in asked.result.reason
    assert given.result.succeeded, given.result
    assert "the answer is forty-two" in given.stdout
