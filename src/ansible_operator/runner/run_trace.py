"""One run's spans: the run's own, its tasks' (from its events) and its API
requests' (from the proxy), each request the child of the task it was sent
during.

Which task a request belongs to is told by time, not by arrival: Ansible
stamps a task's result with when the task began on its host (`start`) and
ended (`end`), and the proxy stamps each request, on the same clock. A
request is done (the proxy answered) before the module that sent it returns,
so before the event of its task's result arrives: requests wait in `pending`
until a task whose span covers their start ends (then they are its children),
or the run does (then they are the run's). A request still open as its task
ends (a watch) finds the task among the `recent` ones when it ends.

All on the event loop: the event receiver and the proxy call in from it.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.observability.request_spans import ApiRequest, request_record
from ansible_operator.observability.spans import AttributeValue, Parent, Span, SpanRecord, Tracer
from ansible_operator.observability.tracing import Tracing
from ansible_operator.runner.events import short_location
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.redaction import Redactor
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.task_spans import TaskSpans

MAX_PENDING = 1000  # requests of one task held for it; more go to the run's span at once
RECENT_TASKS = 16  # ended tasks a late request's start is looked up in
WAIT_SHOWN_NS = 1_000_000  # a wait of the run (for the runner, a slot) shorter is no span


@dataclass(frozen=True)
class _Ended:
    start_ns: int
    end_ns: int
    span: Span

    def covers(self, moment_ns: int) -> bool:
        return self.start_ns <= moment_ns <= self.end_ns


class RunTrace:
    def __init__(
        self,
        tracer: Tracer,
        *,
        parent: Parent | None,
        attributes: Mapping[str, AttributeValue],
        redactor: Redactor,
    ) -> None:
        self.tracer = tracer
        self.redactor = redactor
        self.span = tracer.start("ansible run", parent=parent, attributes=attributes)
        self.tasks = TaskSpans(redact=redactor.text)
        self.pending: list[ApiRequest] = []
        self.recent: collections.deque[_Ended] = collections.deque(maxlen=RECENT_TASKS)
        self.ended = False

    # ----- from the run's events (runner/host.py) --------------------------
    def event(self, event: Mapping[str, Any]) -> None:
        """Call after the run's redactor learnt from `event`."""
        if self.ended:
            return
        record = self.tasks.add(event)
        if record is not None:
            self._task_ended(record)

    def _task_ended(self, record: SpanRecord) -> None:
        span = record.emit(self.tracer, self.span)
        task = _Ended(record.start_ns, record.end_ns, span)
        self.recent.append(task)
        waiting = []
        for request in self.pending:
            if task.covers(request.start_ns):
                self._emit(request, span)
            else:
                waiting.append(request)
        self.pending = waiting

    # ----- from the proxy (proxy/rules/trace.py) ----------------------------
    def request(self, request: ApiRequest) -> None:
        if self.ended:  # a stream the run left open, ended by the revoked grant
            return
        for task in reversed(self.recent):
            if task.covers(request.start_ns):
                self._emit(request, task.span)
                return
        if len(self.pending) >= MAX_PENDING:
            self._emit(self.pending.pop(0), self.span)
        self.pending.append(request)

    def _emit(self, request: ApiRequest, parent: Span) -> None:
        request_record(request, self.redactor.text).emit(self.tracer, parent)

    # ----- what the run waited for (runner/host.py) --------------------------
    def waited(self, name: str, start_ns: int, end_ns: int) -> None:
        """A wait before the run could start (a warm runner still starting, a run
        slot), as the run's child span, if it was long enough to matter."""
        if not self.ended and end_ns - start_ns >= WAIT_SHOWN_NS:
            SpanRecord(name, start_ns, end_ns, {}).emit(self.tracer, self.span)

    # ----- the run's end (runner/host.py) -----------------------------------
    def end(self, attributes: Mapping[str, AttributeValue], error: str | None = None) -> None:
        if self.ended:
            return
        now = time.time_ns()
        for record in self.tasks.unfinished(now):
            self._task_ended(record)
        for request in self.pending:
            self._emit(request, self.span)
        self.pending = []
        self.ended = True
        self.span.set(attributes)
        self.span.end(error=self.redactor.text(error) if error else None)


def start_run_trace(tracing: Tracing, plan: RunPlan, redactor: Redactor) -> RunTrace | None:
    """A run's trace, the child of the span current where it runs (its
    reconcile's; none for an admission run: a trace of its own); None with
    tracing off."""
    if tracing.tracer is None:
        return None
    attributes: dict[str, AttributeValue] = {
        "ansible.run.ident": plan.ident,
        "ansible.run.subject": plan.described,
    }
    if plan.role is not None:
        attributes["ansible.role"] = plan.role.name
    if plan.playbook is not None:
        attributes["ansible.playbook"] = short_location(str(plan.playbook))
    return RunTrace(
        tracing.tracer, parent=tracing.current(), attributes=attributes, redactor=redactor
    )


def run_outcome(result: RunResult | None) -> tuple[dict[str, AttributeValue], str | None]:
    """What a run's span says at its end (`RunTrace.end`'s arguments); `result`
    None: the run was stopped before it had one (cancelled, or its start failed)."""
    if result is None:
        return {"ansible.run.status": "stopped"}, "the run was stopped before it ended"
    attributes: dict[str, AttributeValue] = {"ansible.run.status": result.status}
    if (stats := result.stats) is not None:
        attributes |= {
            "ansible.run.ok": stats.ok,
            "ansible.run.changed": stats.changed,
            "ansible.run.skipped": stats.skipped,
            "ansible.run.failures": stats.failures,
        }
    return attributes, None if result.succeeded else result.message


_UNTRACED = contextlib.nullcontext()


def waiting(trace: RunTrace | None, name: str) -> contextlib.AbstractContextManager[None]:
    """A wait of the run, timed for its trace (`RunTrace.waited`); tracing off, a
    shared no-op."""
    return _UNTRACED if trace is None else _waiting(trace, name)


@contextlib.contextmanager
def _waiting(trace: RunTrace, name: str) -> Iterator[None]:
    start = time.time_ns()
    try:
        yield
    finally:
        trace.waited(name, start, time.time_ns())
