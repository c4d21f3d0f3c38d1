"""What a run achieved, returned once it is over: never changed afterwards.

Made from the run's event summary (events.py) and how its process ended
(process.py). Its `message` says why a failed run failed; it and every text
the caller passes through `redacted` carry no value the run read from a
Secret or gave to a no_log task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ansible_operator.runner.events import FailedTask, RunSummary, Stats
from ansible_operator.runner.redaction import Redactor

RunStatus = Literal["successful", "failed", "timeout", "error", "canceled", "output_limit"]


@dataclass(frozen=True, kw_only=True)
class RunResult:
    ident: str
    status: RunStatus
    stats: Stats | None = None  # None: the run ended before Ansible reported them
    failed_tasks: tuple[FailedTask, ...] = ()
    # From the first requeue_after result with a valid period (events.py).
    requeue_after: float | None = None
    last_task: str = ""
    return_code: int | None = None
    reason: str = ""  # how the process ended, when not as Ansible reported
    duration: float = 0.0
    out_of_memory: str = ""  # the memory cap a process of the run was killed for
    artifacts: Path | None = None  # the run's artifact directory (ansible-runner's)
    failure_message: str = ""  # the failed tasks, described and redacted (events.py)
    # Numbers and booleans the proxy sent as strings, one line per task and value.
    coerced: tuple[str, ...] = ()
    # The conditions the run wrote to its own object's status, by type (the proxy's record).
    owner_conditions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # What the run must not let out, as learnt from its events; never shown.
    redactor: Redactor = field(default_factory=Redactor, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        summary: RunSummary,
        *,
        ident: str,
        status: RunStatus,
        return_code: int | None = None,
        reason: str = "",
        duration: float = 0.0,
        out_of_memory: str = "",
        artifacts: Path | None = None,
    ) -> RunResult:
        """The result of the run `summary` followed, as its process ended."""
        return cls(
            ident=ident,
            status=status,
            stats=summary.stats,
            failed_tasks=tuple(summary.failed_tasks),
            requeue_after=summary.requeue_after,
            last_task=summary.last_task,
            return_code=return_code,
            reason=reason,
            duration=duration,
            out_of_memory=out_of_memory,
            artifacts=artifacts,
            failure_message=summary.failure_message,
            coerced=summary.coerced,
            redactor=summary.redactor,
        )

    @property
    def succeeded(self) -> bool:
        stats = self.stats
        return (
            self.status == "successful"
            and stats is not None
            and stats.failures == 0
            and stats.unreachable == 0
        )

    def redacted(self, text: str) -> str:
        """`text` without what the run must not let out (what it read from Secrets)."""
        return self.redactor.text(text)

    @property
    def message(self) -> str:
        """Why the run failed, for the Failure condition and the Event; never
        a value the run read from a Secret or gave to a no_log task."""
        return self.redacted(self._message())

    def _message(self) -> str:
        if self.succeeded:
            return ""
        memory = (
            f"; the run reached its memory limit ({self.out_of_memory}, --run-memory-limit) "
            "and its largest process was killed"
            if self.out_of_memory
            else ""
        )
        if self.status in ("timeout", "output_limit"):  # whatever the killed tasks reported
            return self.reason
        if self.stats is not None and self.failure_message:
            return self.failure_message + memory
        return (self.reason or f"ansible-runner ended with status {self.status}") + memory
