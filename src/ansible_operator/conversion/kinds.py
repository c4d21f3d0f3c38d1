"""One kind's conversions as watches.yaml declares them (project/conversion_entries.py
reads them): the hub version, and for each other version a field map or a role."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.conversion.field_map import FieldMap


@dataclass(frozen=True)
class RoleConversion:
    """A role (or playbook) that converts a batch of objects, one run per review."""

    role: pathlib.Path | None
    playbook: pathlib.Path | None
    vars: dict[str, Any] = field(default_factory=dict)
    max_runner_artifacts: int = 20


@dataclass(frozen=True)
class VersionConversion:
    """How `version`'s objects become the hub's and back: exactly one of the two."""

    version: str
    field_map: FieldMap | None = None
    role: RoleConversion | None = None
    source: str = ""  # FILE:LINE of the version's entry

    def describe(self) -> str:
        how = "fieldMap" if self.field_map is not None else "role"
        return f"{self.source} ({self.version}, {how})"


@dataclass(frozen=True)
class KindConversion:
    group: str
    kind: str
    hub: str
    versions: tuple[VersionConversion, ...]
    source: str = ""  # FILE:LINE of the entry

    def version(self, name: str) -> VersionConversion | None:
        for each in self.versions:
            if each.version == name:
                return each
        return None

    @property
    def version_names(self) -> tuple[str, ...]:
        return (self.hub, *(each.version for each in self.versions))

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def describe(self) -> str:
        return f"{self.source} (conversion of {self.kind}.{self.group})"
