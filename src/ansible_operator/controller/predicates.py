"""Which watch events of a primary object deserve a reconcile (the reference's
predicates), as pure functions over the old and new object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Bookkeeping the API server changes on every write; never a reason to run.
_BOOKKEEPING = ("resourceVersion", "managedFields")


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _without_bookkeeping(obj: Mapping[str, Any]) -> dict[str, Any]:
    trimmed = {key: value for key, value in obj.items() if key != "status"}
    trimmed["metadata"] = {
        key: value for key, value in _meta(obj).items() if key not in _BOOKKEEPING
    }
    return trimmed


def primary_update_matters(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    watch_annotations: bool,
) -> bool:
    """A MODIFIED event of a watched object: reconcile it?

    - generation changed (spec changes of kinds that have a generation);
    - deletion started (deletionTimestamp newly set); finalizer edits alone do
      not count, or adding our own finalizer would cause a second run;
    - objects without a generation (Secrets, ConfigMaps): any change except
      status and bookkeeping metadata;
    - annotations changed, when the watch asks for it (watchAnnotationsChanges).
    """
    if old is None:
        return True
    old_meta, new_meta = _meta(old), _meta(new)
    if "generation" not in new_meta:
        return _without_bookkeeping(old) != _without_bookkeeping(new)
    if old_meta.get("generation") != new_meta.get("generation"):
        return True
    if old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp"):
        return True
    return watch_annotations and old_meta.get("annotations") != new_meta.get("annotations")


def dependent_update_matters(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], *, follow_status: bool
) -> bool:
    """A MODIFIED dependent: re-run its owner unless only status or bookkeeping
    changed (status too when the owner's watch sets watchDependentStatus)."""
    if old is None:
        return True
    if follow_status and (old.get("status") != new.get("status")):
        return True
    return _without_bookkeeping(old) != _without_bookkeeping(new)
