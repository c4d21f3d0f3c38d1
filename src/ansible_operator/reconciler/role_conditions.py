"""The kstatus conditions (`Ready`, `Reconciling`, `Stalled`) a role or playbook
sets itself, as its files name them: `type: Ready`, `{'type': 'Ready', ...}`.

Known before its first run, so the operator never writes a condition of that type
for the watch's objects, not even for an object the role leaves without one (a
cluster-api infrastructure without its cluster). A role that builds the type's
name at run time is found by its first write instead (reconciler/conditions.py,
`role_owned`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ansible_operator.reconciler.conditions import KSTATUS_TYPES

# A condition's type given as one of them: YAML (`type: Ready`), flow or Jinja
# mappings (`{'type': 'Ready'}`, `"type": "Ready"`); not a comparison or a filter's
# arguments (`selectattr('type', 'eq', 'Ready')`), which read another object's.
NAMED = re.compile(
    r"""\btype['"]?\s*:\s*['"]?(%s)\b""" % "|".join(KSTATUS_TYPES)  # noqa: UP031
)
SUFFIXES = (".yml", ".yaml", ".j2", ".json")
MOST_FILES = 2000
LARGEST_FILE = 1 << 20


def conditions_named(role: Path | None, playbook: Path | None) -> frozenset[str]:
    named: set[str] = set()
    for path in _files(role, playbook):
        try:
            if path.stat().st_size > LARGEST_FILE:
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        named.update(match.group(1) for match in NAMED.finditer(text))
    return frozenset(named)


def _files(role: Path | None, playbook: Path | None) -> Iterator[Path]:
    if playbook is not None:
        yield playbook
    if role is not None and role.is_dir():
        found = (path for path in sorted(role.rglob("*")) if path.suffix in SUFFIXES)
        for count, path in enumerate(found):
            if count >= MOST_FILES:
                return
            if path.is_file():
                yield path
