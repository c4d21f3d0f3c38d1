"""One problem found by `ansible-operator check`, and how it is printed."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

__all__ = ["Finding", "Severity", "error", "from_problem", "place", "warning"]


class Severity(Enum):
    ERROR = "error"  # will fail when it runs
    WARNING = "warning"  # runs, but means something else than before, or soon fails


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    severity: Severity
    message: str

    def format(self, relative_to: Path | None = None) -> str:
        return f"{place(self.path, self.line, relative_to)}: {self.severity.value}: {self.message}"

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def place(path: str | Path, line: int, relative_to: Path | None = None) -> str:
    """`FILE:LINE`, the file relative to `relative_to` when it is under it."""
    shown = str(path)
    if relative_to is not None:
        with contextlib.suppress(ValueError):
            shown = str(Path(path).resolve().relative_to(relative_to.resolve()))
    return f"{shown}:{line}"


def error(path: str | Path, line: int, message: str) -> Finding:
    return Finding(str(path), line, Severity.ERROR, message)


def warning(path: str | Path, line: int, message: str) -> Finding:
    return Finding(str(path), line, Severity.WARNING, message)


_PROBLEM = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<message>.*)$", re.DOTALL)


def from_problem(problem: str, default_path: str) -> Finding:
    """A `FILE:LINE: message` string (as `WatchesError` holds) as an error."""
    match = _PROBLEM.match(problem)
    if match is None:
        return error(default_path, 1, problem)
    return error(match["path"], int(match["line"]), match["message"])
