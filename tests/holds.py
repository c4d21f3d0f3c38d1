"""A test's hold on a run at a known task, with no timing: the role's side of it is
two tasks, one writing `<hold>.reached`, one waiting until `<hold>` is gone (see
tests/faults/operator/roles/work/tasks/main.yml)."""

from __future__ import annotations

from pathlib import Path

from ansible_operator.testing.waiting import eventually


class Hold:
    """A test's hold on the runs of Work objects created with `hold=hold.path`: each run
    says when it reaches the hold (`<path>.reached`, written by the role) and waits
    there until `release()`. Faults strike mid-run at a known task, with no timing."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "hold"
        self.path.touch()

    @property
    def reached_marker(self) -> Path:
        return self.path.with_name(f"{self.path.name}.reached")

    def wait_reached(self, timeout: float = 90.0) -> None:
        eventually(self.reached_marker.exists, timeout=timeout, what="a run at the hold")

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
