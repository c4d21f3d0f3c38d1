"""What is unsafe in a CRD, alone or against the one before it (what `check` reports).

Alone, with the kind's declared conversion (`served_problems`):
- a served version the API server cannot convert to and from the others: no
  `- conversion:` entry names it, and the CRD's strategy is None while the versions'
  schemas differ (None keeps what the target version declares and drops the rest);
- a declared conversion that does not fit the CRD (a hub or version it lacks).

Against the CRD before (the one installed, or at a git revision: `changes`):
- a version removed while objects may still be stored in it (`status.storedVersions`;
  from git, the version that was the storage one): the API server refuses the CRD, or,
  stored objects become unreadable;
- in a version both have, a field removed (the API server prunes it from every stored
  object as it reads it: the data is gone) or retyped (stored objects no longer validate:
  every update fails), where no `x-kubernetes-preserve-unknown-fields` keeps it;
- in a version both have, a new required field without a default: every stored object
  lacks it, and no update of one succeeds until someone sets it;
- a new storage version: objects stay in the old one until migrated (a warning).

Pure functions over the CRDs as dicts; each finding names the version and the field's path
as `spec.database.replicas` (`[]` an array's items, `{}` a map's values).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ansible_operator.conversion.kinds import KindConversion
from ansible_operator.conversion.schema import version_schemas

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class CrdProblem:
    crd: str
    version: str  # "" for the CRD as a whole
    path: tuple[str, ...]  # of the field, () for the version or the CRD
    severity: Severity
    message: str
    source: str = ""  # watches.yaml:LINE when the problem is the declared conversion's

    def describe(self) -> str:
        return f"{self.source}: {self.message}" if self.source else self.message


def _name(crd: dict[str, Any]) -> str:
    return str((crd.get("metadata") or {}).get("name", ""))


def _versions(crd: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in (crd.get("spec") or {}).get("versions") or [] if isinstance(v, dict)]


def storage_version(crd: dict[str, Any]) -> str | None:
    for version in _versions(crd):
        if version.get("storage"):
            return str(version.get("name"))
    return None


def kind_of(crd: dict[str, Any]) -> tuple[str, str]:
    spec = crd.get("spec") or {}
    return str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", ""))


def declared_problems(declared: KindConversion, crd: dict[str, Any]) -> list[CrdProblem]:
    """What in the CRD does not go with the declared conversion."""
    name = _name(crd)
    versions = _versions(crd)
    names = [v.get("name") for v in versions]
    found: list[CrdProblem] = []
    if declared.hub not in names:
        found.append(
            CrdProblem(
                name,
                declared.hub,
                (),
                "error",
                f"the hub {declared.hub} is not a version of CRD {name} "
                f"(it has {', '.join(str(n) for n in names)})",
                declared.source,
            )
        )
    for version in versions:
        if version.get("served") and version.get("name") not in declared.version_names:
            found.append(
                CrdProblem(
                    name,
                    str(version.get("name")),
                    (),
                    "error",
                    f"CRD {name} serves version {version.get('name')}, which has no conversion "
                    "declared: the API server cannot read its objects in the other versions "
                    "(add it to 'versions')",
                    declared.source,
                )
            )
    for version in declared.versions:
        if version.version not in names:
            found.append(
                CrdProblem(
                    name,
                    version.version,
                    (),
                    "error",
                    f"version {version.version} is not a version of CRD {name}",
                    version.source,
                )
            )
    return found


def served_problems(crd: dict[str, Any], declared: KindConversion | None) -> list[CrdProblem]:
    """The CRD alone, with the kind's conversion if watches.yaml declares one."""
    if declared is not None:
        return declared_problems(declared, crd)
    name = _name(crd)
    served = [v for v in _versions(crd) if v.get("served")]
    if len(served) < 2:
        return []
    strategy = ((crd.get("spec") or {}).get("conversion") or {}).get("strategy", "None")
    if strategy == "Webhook":
        return []  # someone else's webhook: not ours to judge
    schemas = version_schemas(crd)
    first = str(served[0].get("name"))
    return [
        CrdProblem(
            name,
            str(version.get("name")),
            (),
            "error",
            f"CRD {name} serves {first} and {version.get('name')} with different schemas and "
            "no conversion (strategy None keeps what the version read declares and drops the "
            "rest): add a '- conversion:' entry to watches.yaml with a fieldMap or a role",
        )
        for version in served[1:]
        if schemas.get(str(version.get("name"))) != schemas.get(first)
    ]


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[CrdProblem]:
    """What is unsafe in going from the CRD `before` (installed, or at a revision) to
    `after` (see the module)."""
    name = _name(after)
    found: list[CrdProblem] = []
    old_versions = {str(v.get("name")): v for v in _versions(before)}
    new_versions = {str(v.get("name")): v for v in _versions(after)}
    stored = list((before.get("status") or {}).get("storedVersions") or [])
    if not stored and storage_version(before):
        stored = [str(storage_version(before))]
    for version in old_versions:
        if version in new_versions:
            continue
        if version in stored:
            found.append(
                CrdProblem(
                    name,
                    version,
                    (),
                    "error",
                    f"version {version} is removed but objects may be stored in it "
                    f"(storedVersions: {', '.join(stored)}): keep it (served: false) until "
                    f"`ansible-operator migrate {name}` has moved them to "
                    f"{storage_version(after)}",
                )
            )
    old_storage, new_storage = storage_version(before), storage_version(after)
    if old_storage and new_storage and old_storage != new_storage and old_storage in new_versions:
        found.append(
            CrdProblem(
                name,
                new_storage,
                (),
                "warning",
                f"the storage version moves from {old_storage} to {new_storage}: objects stay "
                f"stored in {old_storage} until `ansible-operator migrate {name}` rewrites them",
            )
        )
    old_schemas, new_schemas = version_schemas(before), version_schemas(after)
    for version in new_versions:
        if version not in old_versions:
            continue
        for path, severity, message in _field_changes(
            old_schemas.get(version), new_schemas.get(version), ()
        ):
            found.append(CrdProblem(name, version, path, severity, message))
    return found


def _field_changes(
    old: dict[str, Any] | None, new: dict[str, Any] | None, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Severity, str]]:
    if old is None or new is None or new.get("x-kubernetes-preserve-unknown-fields") is True:
        if new is not None and new.get("x-kubernetes-preserve-unknown-fields") is True:
            yield from _required(old, new, path)
        return
    old_type, new_type = _type(old), _type(new)
    if old_type and new_type and old_type != new_type:
        yield (
            path,
            "error",
            f"{_dotted(path)} changes type from {old_type} to {new_type}: stored objects "
            "holding the old type no longer validate, so every update of them fails; add a "
            "version with the new type and a conversion instead",
        )
        return
    old_properties = old.get("properties") or {}
    new_properties = new.get("properties") or {}
    for key, sub in old_properties.items():
        if key in new_properties:
            yield from _field_changes(sub, new_properties[key], (*path, key))
        elif not isinstance(new.get("additionalProperties"), dict):
            yield (
                (*path, key),
                "error",
                f"{_dotted((*path, key))} is removed: the API server drops it from every "
                "stored object as it reads it; keep it, or add a version without it and a "
                "conversion that moves it (fieldMap) instead",
            )
    yield from _required(old, new, path)
    if isinstance(old.get("items"), dict) and isinstance(new.get("items"), dict):
        yield from _field_changes(old["items"], new["items"], (*path, "[]"))
    if isinstance(old.get("additionalProperties"), dict) and isinstance(
        new.get("additionalProperties"), dict
    ):
        yield from _field_changes(
            old["additionalProperties"], new["additionalProperties"], (*path, "{}")
        )


def _required(
    old: dict[str, Any] | None, new: dict[str, Any], path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Severity, str]]:
    before = set((old or {}).get("required") or [])
    properties = new.get("properties") or {}
    for key in new.get("required") or []:
        if key in before or "default" in (properties.get(key) or {}):
            continue
        yield (
            (*path, key),
            "error",
            f"{_dotted((*path, key))} is newly required with no default: stored objects lack "
            "it, and none of them can be updated until someone sets it; give it a default",
        )


def _type(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string") is True:
        return "int-or-string"
    return str(schema.get("type") or "")


def _dotted(path: tuple[str, ...]) -> str:
    out = ""
    for key in path:
        out += key if key in ("[]", "{}") else (f".{key}" if out else key)
    return out or "the object"
