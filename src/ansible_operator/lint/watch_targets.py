"""Read watches.yaml as `run` does, but on past a role or playbook that is not there:
`check` reports each one (the loader's message says where it looked, what was meant
and how to install a collection) and goes on checking every other target."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from ansible_operator.lint.findings import Finding, from_problem
from ansible_operator.project import watches
from ansible_operator.project.watches import WatchesError, WatchesFile

__all__ = ["load_reading_on"]


class _ReadingOn(watches._Loader):
    """The watches file's own loader, which sets a missing role or playbook aside
    instead of refusing the watch, webhook or finalizer that names it."""

    def __init__(self, path: Path, env: Mapping[str, str], cwd: Path) -> None:
        super().__init__(path, env, cwd)
        self.missing: list[str] = []

    def resolve_role(self, node: yaml.Node, role: str, name: str) -> Path | None:
        before = len(self.errors)
        return self._set_aside(before, super().resolve_role(node, role, name))

    def resolve_playbook(self, node: yaml.Node, playbook: str, name: str) -> Path | None:
        before = len(self.errors)
        return self._set_aside(before, super().resolve_playbook(node, playbook, name))

    def _set_aside(self, errors_before: int, found: Path | None) -> Path | None:
        if found is None and len(self.errors) > errors_before:
            self.missing.append(self.errors.pop())
        return found


def load_reading_on(
    path: Path, env: Mapping[str, str], cwd: Path
) -> tuple[WatchesFile | None, list[Finding]]:
    """The watches and webhooks of `path`, those with a missing target kept without
    it, and an error for each missing target; (None, errors) when the file has other
    problems. Raises FileNotFoundError."""
    loader = _ReadingOn(path, env, cwd)
    text = path.read_text(encoding="utf-8")
    try:
        loaded: WatchesFile | None = WatchesFile(
            loader.load(text), loader.webhooks, loader.conversions
        )
        problems = []
    except WatchesError as failure:
        loaded, problems = None, list(failure.problems)
    return loaded, [from_problem(p, str(path)) for p in [*problems, *loader.missing]]
