"""Runner events -> what a run achieved: stats, failed tasks, requeue requests.

Pure data handling over the event dicts that ansible-runner produces, so it
can be table-tested without running Ansible: `EventFold` folds them into what
the run did, `OutputGuard` counts their output against the run's cap, and
`RunSummary` feeds both, and the run's redactor first, from one place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_operator.runner.event_plugin import OUTPUT_SIZE_FIELD
from ansible_operator.runner.rbac_refusal import Refusals, describe_all, rbac_refusal
from ansible_operator.runner.redaction import SENSITIVE_EVENT, Redactor
from ansible_operator.runner.string_fields import Coercions

# The task actions the Go operator reads a requeue period from.
REQUEUE_ACTIONS = frozenset({"requeue_after", "operator_sdk.util.requeue_after"})
# Events that carry a successful result: a task's, or one loop item's.
REQUEUE_EVENTS = frozenset({"runner_on_ok", "runner_item_on_ok"})
NO_LOG_MESSAGE = "the output has been hidden due to the fact that 'no_log: true' was specified"
# Characters of a failure message: the Failure condition holds it whole, and a
# module may fail with a whole API response in its msg.
MAX_FAILURE_MESSAGE = 4096
CUT_MARK = " ... (cut)"


@dataclass(frozen=True)
class Stats:
    """playbook_on_stats summed over hosts: the source of truth for failures,
    since Ansible already discounts rescued tasks from `failures`."""

    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    unreachable: int = 0
    rescued: int = 0
    ignored: int = 0

    @classmethod
    def from_event(cls, event_data: Mapping[str, Any]) -> Stats:
        def total(key: str) -> int:
            value = event_data.get(key) or {}
            return sum(value.values()) if isinstance(value, Mapping) else 0

        return cls(
            ok=total("ok"),
            changed=total("changed"),
            skipped=total("skipped"),
            failures=total("failures"),
            unreachable=total("dark"),
            rescued=total("rescued"),
            ignored=total("ignored"),
        )


@dataclass(frozen=True)
class FailedTask:
    task: str
    path: str  # FILE:LINE, as Ansible's task_path gives it; "" if it gives none
    action: str
    message: str  # the result's msg (or stderr, reason, items' msgs); "" if none
    unreachable_host: str = ""  # set when the task could not reach its host

    def describe(self, base: Path | None = None) -> str:
        """`task "NAME" (FILE:LINE) failed: MESSAGE`, with FILE relative to
        `base` (default: the working directory) when it is under it, so a
        person can open it; the bare message when Ansible named no file."""
        if self.path:
            where = f" ({short_location(self.path, base)})"
        elif self.message:
            return self.message
        else:
            where = ""
        what = f"could not reach {self.unreachable_host}" if self.unreachable_host else "failed"
        return f'task "{self.task or "?"}"{where} {what}' + (
            f": {self.message}" if self.message else ""
        )


def short_location(location: str, base: Path | None = None) -> str:
    """`FILE[:LINE[:COLUMN]]` with FILE relative to `base` (default: the
    working directory) when under it, else as given."""
    file, suffix = location, ""
    head, colon, tail = location.rpartition(":")
    while colon and tail.isdigit():
        file, suffix = head, f":{tail}{suffix}"
        head, colon, tail = head.rpartition(":")
    base = Path.cwd() if base is None else base
    for root in dict.fromkeys([base, base.resolve()]):
        try:
            return f"{Path(file).relative_to(root)}{suffix}"
        except ValueError:
            continue
    return location


def bounded(text: str, limit: int = MAX_FAILURE_MESSAGE) -> str:
    """`text` cut to `limit` characters, saying so. Cut only redacted text: a
    cut through a secret would leave a part the redactor no longer knows."""
    if len(text) <= limit:
        return text
    return text[: limit - len(CUT_MARK)] + CUT_MARK


@dataclass
class EventFold:
    """What a run's events say it did, folded in one by one (`add`), in order:
    plain data, table-tested without Ansible. Knows nothing of what the run
    must not let out: `failure_message` is given the redactor."""

    stats: Stats | None = None
    failed_tasks: list[FailedTask] = field(default_factory=list)
    # From the first requeue_after result with a valid period, as the Go
    # operator takes the first (it stops reading there).
    requeue_after: float | None = None
    events: int = 0
    last_task: str = ""
    # The RBAC refusals the proxy saw for the run (a no_log task's say nothing else).
    refusals: Refusals = field(default_factory=Refusals)
    # The numbers and booleans the proxy sent as strings, and said per task (`coerced`).
    coercions: Coercions = field(default_factory=Coercions)
    coerced: list[str] = field(default_factory=list)

    def add(self, event: Mapping[str, Any]) -> None:
        self.events += 1
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if (task := task_started(event)) is not None:
            self.last_task = task
        elif kind == "playbook_on_stats":
            self.stats = Stats.from_event(data)
        if kind in ("runner_on_ok", "runner_on_failed") and self.coercions.seen:
            self._say_coerced(data)
        if kind in ("runner_on_failed", "runner_on_unreachable"):
            if data.get("ignore_errors"):
                return
            self.failed_tasks.append(
                failed_task(
                    data, unreachable=kind == "runner_on_unreachable", refusals=self.refusals
                )
            )
        elif kind in REQUEUE_EVENTS and self.requeue_after is None:
            self.requeue_after = requeue_period(data)

    def _say_coerced(self, data: Mapping[str, Any]) -> None:
        coerced = self.coercions.between(data.get("start"), data.get("end"))
        if not coerced:
            return
        task = FailedTask(
            task=str(data.get("task", "")), path=str(data.get("task_path", "")), action="",
            message="",
        )  # fmt: skip
        where = f" ({short_location(task.path)})" if task.path else ""
        for item in dict.fromkeys(coerced):
            self.coerced.append(
                f'task "{task.task or "?"}"{where}: {item.describe()}; ansible-core 2.19+ '
                "keeps a template's type: add `| string` to it (`ansible-operator check` "
                "names each such template)"
            )

    def failure_message(self, redactor: Redactor) -> str:
        """The failed tasks, each with its file:line and message (`describe`),
        redacted, then bounded. Only the last failure per host ended the run;
        earlier ones were rescued, so with one host, the last one counts."""
        if not self.failed_tasks:
            return ""
        count = max(1, self.stats.failures + self.stats.unreachable) if self.stats else 1
        described = "\n".join(task.describe() for task in self.failed_tasks[-count:])
        return bounded(redactor.text(described))


class OutputGuard:
    """A run's Ansible output counted against its cap (--max-run-output):
    `exceeded` is set once it passed `limit` (None: no cap), and the run is
    stopped (process.py waits on it)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.size = 0  # characters of Ansible output so far
        self.exceeded = asyncio.Event()

    def add(self, event: Mapping[str, Any]) -> None:
        self.size += int(event.get(OUTPUT_SIZE_FIELD) or len(event.get("stdout") or ""))
        if self.limit and self.size > self.limit:
            self.exceeded.set()


@dataclass
class RunSummary:
    """One run's events as they arrive, in three parts, each written only by
    `add` (called by the run's event handler, runner/host.py, for each event):

    - `redactor`: what the run must not let out, learnt from each event
      before anything else reads it (this very event may carry a Secret), on
      top of the run's credentials, which the host gave it before the run;
    - `guard`: the output counted against the run's cap;
    - `fold`: what the run did (stats, failed tasks, requeue_after).

    The run's process (process.py) and its result (result.py) only read them.
    """

    redactor: Redactor = field(default_factory=Redactor)
    guard: OutputGuard = field(default_factory=OutputGuard)
    fold: EventFold = field(default_factory=EventFold)

    def add(self, event: Mapping[str, Any]) -> None:
        self.redactor.learn(event)  # first: this very event may carry a Secret
        if event.get("event") == SENSITIVE_EVENT:
            return  # our callback plugin's, for the redactor alone
        self.guard.add(event)
        self.fold.add(event)

    # What the run did, as the fold has it.
    @property
    def stats(self) -> Stats | None:
        return self.fold.stats

    @property
    def failed_tasks(self) -> list[FailedTask]:
        return self.fold.failed_tasks

    @property
    def requeue_after(self) -> float | None:
        return self.fold.requeue_after

    @property
    def last_task(self) -> str:
        return self.fold.last_task

    @property
    def coerced(self) -> tuple[str, ...]:
        """What the proxy sent as strings for the run, per task, redacted."""
        return tuple(bounded(self.redactor.text(line)) for line in self.fold.coerced)

    @property
    def failure_message(self) -> str:
        """The failed tasks, described, redacted and bounded (EventFold.failure_message)."""
        return self.fold.failure_message(self.redactor)


def task_started(event: Mapping[str, Any]) -> str | None:
    """The task an event says has started (None: no task start)."""
    if event.get("event") != "playbook_on_task_start":
        return None
    return str((event.get("event_data") or {}).get("task", ""))


def failed_task(
    data: Mapping[str, Any], *, unreachable: bool = False, refusals: Refusals | None = None
) -> FailedTask:
    """The task a failed event names, and why it failed. A 403 for RBAC says
    what to allow instead of the API's JSON; so does a no_log task's, whose
    refusal only the proxy's record (`refusals`) knows."""
    result = data.get("res") or {}
    message = ""
    censored = False
    if isinstance(result, Mapping):
        message = str(result.get("msg") or "")
        if not message and result.get("censored"):
            message = NO_LOG_MESSAGE
            censored = True
        if not message:
            message = str(result.get("stderr") or result.get("reason") or "")
        if not message and isinstance(result.get("results"), list):
            item_messages = [
                str(item.get("msg"))
                for item in result["results"]
                if isinstance(item, Mapping) and item.get("failed") and item.get("msg")
            ]
            message = "\n".join(item_messages)
    refusal = rbac_refusal(message)
    if refusal is not None:  # the API's raw 403 says less than what to change
        message = refusal.describe()
    elif refusals is not None and (seen := refusals.between(data.get("start"), data.get("end"))):
        # What the task's output does not say (hidden, or quoted otherwise),
        # the proxy saw: the API server's refusal, never a value of the task.
        hidden = " (its output is hidden by no_log; the operator's API proxy saw this)"
        message = describe_all(seen) + (hidden if censored else "")
    return FailedTask(
        task=str(data.get("task", "")),
        path=str(data.get("task_path", "")),
        action=str(data.get("task_action", "")),
        message=message,
        unreachable_host=str(data.get("host") or "its host") if unreachable else "",
    )


def requeue_period(data: Mapping[str, Any]) -> float | None:
    """A requeue_after task's period in seconds, from its result; None when
    the result has none, or one that is no duration (only a module of that
    name other than ours can return one): the run's other requeue_after
    results, else the reconcile period, decide instead."""
    if data.get("task_action") not in REQUEUE_ACTIONS:
        return None
    result = data.get("res") or {}
    if not isinstance(result, Mapping):
        return None
    period = result.get("period")
    if isinstance(period, int | float):
        return float(period)
    if isinstance(period, str):
        from ansible_operator.values.durations import DurationError, parse_duration

        try:
            return parse_duration(period, bare_number_unit="s")
        except DurationError:
            return None
    return None
