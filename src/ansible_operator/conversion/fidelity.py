"""What a version cannot hold of an object, kept in an annotation and given back.

Kubernetes' API conventions: a round trip through another version loses nothing, so what
the other version has no field for travels in an annotation. Converting an object of
version F to version T, the converter converts the result back to F; where that differs
from the object it was given, the annotation `conversion.ansible-operator.io/F` on the T
object keeps the difference, one JSON pointer per field:

    {"/spec/configuration": {"value": {...}},                 # F had it, T cannot hold it
     "/spec/database/version": {"seen": "15"},                # F had none; T's default
     "/spec/expose/host": {"value": "a:b", "seen": "a"}}      # T holds only part of it

Converting that T object to F later gives each field its `value` back (no `value`: removes
it), provided the field still reads what the round trip made of it (`seen`, or absent):
if the user changed it through T since, the change wins. The annotation is removed then.

Pure functions over JSON values; pointers through mappings only (a list differs whole).
"""

from __future__ import annotations

import json
from typing import Any

from ansible_operator.conversion.paths import (
    MISSING,
    Blocked,
    PathError,
    from_pointer,
    get,
    placed,
    pointer,
    removed,
    same,
)

PREFIX = "conversion.ansible-operator.io/"
BODY_SKIPS = frozenset({"apiVersion", "kind", "metadata"})
# The API server refuses an object whose annotations pass 256 KiB together.
MAX_ANNOTATIONS = 256 * 1024

Kept = dict[str, dict[str, Any]]


def annotation(version: str) -> str:
    """The annotation that keeps, on an object of another version, what `version` had."""
    return PREFIX + version


def losses(original: dict[str, Any], back: dict[str, Any]) -> Kept:
    """What converting `back` to `original`'s version must restore to give `original`
    (both in that version; their apiVersion, kind and metadata are not compared)."""
    kept: Kept = {}
    for key in original.keys() | back.keys():
        if key not in BODY_SKIPS:
            _differences(original.get(key, MISSING), back.get(key, MISSING), (key,), kept)
    return kept


def _differences(first: Any, second: Any, at: tuple[str, ...], kept: Kept) -> None:
    if first is second:
        return
    if isinstance(first, dict) and isinstance(second, dict):
        for key, value in first.items():
            other = second.get(key, MISSING)
            if other is not value:
                _differences(value, other, (*at, key), kept)
        for key, other in second.items():
            if key not in first:
                _differences(MISSING, other, (*at, key), kept)
        return
    if first is not MISSING and second is not MISSING and same(first, second):
        return
    entry: dict[str, Any] = {}
    if first is not MISSING:
        entry["value"] = first
    if second is not MISSING:
        entry["seen"] = second
    kept[pointer(at)] = entry


def restore(obj: dict[str, Any], kept: Kept) -> dict[str, Any]:
    """`obj` with what `kept` holds given back, where the field reads what it read when it
    was kept (see the module)."""
    for text, entry in sorted(kept.items()):
        try:
            path = from_pointer(text)
        except PathError:
            continue
        if not path or path[0] in BODY_SKIPS or not isinstance(entry, dict):
            continue
        if not _unchanged(get(obj, path), entry.get("seen", MISSING)):
            continue  # changed through the other version since: that change wins
        try:
            if "value" in entry:
                obj = placed(obj, path, entry["value"])
            else:
                obj, _ = removed(obj, path, drop_emptied=False)
        except Blocked:
            continue
    return obj


def _unchanged(now: Any, seen: Any) -> bool:
    if now is MISSING or seen is MISSING:
        return now is seen
    return same(now, seen)


def encode(kept: Kept) -> str:
    return json.dumps(kept, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def decode(text: Any) -> Kept | None:
    """The annotation's value read back; None when it is not one of ours."""
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(key, str) and isinstance(entry, dict) for key, entry in value.items()
    ):
        return None
    return value


def with_annotations(obj: dict[str, Any], changes: dict[str, str | None]) -> dict[str, Any]:
    """`obj` with these annotations set (None: removed); its metadata copied, not changed."""
    metadata = obj.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    current = metadata.get("annotations")
    annotations = dict(current) if isinstance(current, dict) else {}
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    out = dict(obj)
    out["metadata"] = metadata
    return out


def annotations_size(obj: dict[str, Any]) -> int:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return sum(len(key.encode()) + len(str(value).encode()) for key, value in annotations.items())
