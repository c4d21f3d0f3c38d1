"""What k8s_status writes: condition validation and merging, and the status a
merge patch leads to. Pure functions over plain data.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

import copy
import re

LAST_TRANSITION = "lastTransitionTime"
CONDITION_STATUSES = ("True", "False", "Unknown")
# metav1.Condition's reason pattern; it accepts every reason the original's
# letters-only check accepts, and digits, "_", "," and ":" besides.
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
# The original's RFC 3339 check: seconds optional, "T" or a space, "Z" or an offset.
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class ConditionError(ValueError):
    """A condition given in ``conditions`` breaks the conditions' conventions."""


def validate_conditions(conditions):
    """The ``conditions`` parameter without its unset (None) fields; raise
    ConditionError on a condition that breaks the conventions."""
    result = []
    for condition in conditions or []:
        condition = {key: value for key, value in condition.items() if value is not None}
        for key in ("type", "status"):
            if not condition.get(key):
                raise ConditionError(f"Condition `{key}` must be set")
        if condition["status"] not in CONDITION_STATUSES:
            raise ConditionError(
                f"Condition 'status' must be one of {list(CONDITION_STATUSES)}, "
                f"not {condition['status']!r}"
            )
        reason = condition.get("reason")
        if reason and not _REASON.match(reason):
            raise ConditionError("Condition 'reason' must be a single, CamelCase word")
        for key in ("lastHeartbeatTime", LAST_TRANSITION):
            if condition.get(key) and not _RFC3339.match(condition[key]):
                raise ConditionError(f"'{key}' must be an RFC3339 compliant datetime string")
        result.append(condition)
    return result


def merge_condition(old, given, now):
    """The condition to store when ``given`` meets ``old`` (None: a new type).

    As the original: when a given field other than lastTransitionTime differs,
    the given condition replaces the old one whole (fields not given go);
    otherwise the old one stays untouched. Unlike the original, a condition
    written without a lastTransitionTime gets one: the old one's while the
    status stays the same, else ``now``.
    """
    if old is None:
        new = dict(given)
        new.setdefault(LAST_TRANSITION, now)
        return new
    if all(old.get(key) == value for key, value in given.items() if key != LAST_TRANSITION):
        return old
    new = dict(given)
    if LAST_TRANSITION not in new:
        same_status = old.get("status") == new.get("status")
        new[LAST_TRANSITION] = old.get(LAST_TRANSITION) if same_status else now
        if not new[LAST_TRANSITION]:
            new[LAST_TRANSITION] = now
    return new


def merge_conditions(old_conditions, given_conditions, now):
    """``old_conditions`` with each given condition merged in by ``type``:
    old order kept, new types appended, types not given left as they are."""
    merged = [copy.deepcopy(c) for c in old_conditions or []]
    for given in given_conditions:
        if not isinstance(given, dict):
            merged.append(given)
            continue
        index = next(
            (
                i
                for i, old in enumerate(merged)
                if isinstance(old, dict) and old.get("type") == given.get("type")
            ),
            None,
        )
        if index is None:
            merged.append(merge_condition(None, given, now))
        else:
            merged[index] = merge_condition(merged[index], given, now)
    return merged


def split_conditions(status, conditions):
    """The given status with ``conditions`` placed at ``status.conditions``.

    Raises ConditionError when both give conditions, as the original does.
    """
    status = copy.deepcopy(status or {})
    if conditions:
        if status.get("conditions"):
            raise ConditionError(
                "You cannot specify conditions in both the 'status' and 'conditions' parameters"
            )
        status["conditions"] = conditions
    return status


def status_patch(current, given, now):
    """The ``status`` of the merge patch that writes ``given`` over ``current``:
    the given keys, with given conditions merged into the current ones."""
    patch = copy.deepcopy(given)
    conditions = patch.get("conditions")
    if isinstance(conditions, list):
        patch["conditions"] = merge_conditions(current.get("conditions"), conditions, now)
    return patch


def replacement_status(current, given, now):
    """The whole status ``replace`` writes: ``given`` exactly, its conditions
    completed with a lastTransitionTime (the current condition's while its
    status stays the same)."""
    new = copy.deepcopy(given)
    conditions = new.get("conditions")
    if isinstance(conditions, list):
        old_by_type = {
            c.get("type"): c for c in current.get("conditions") or [] if isinstance(c, dict)
        }
        completed = []
        for condition in conditions:
            if isinstance(condition, dict) and LAST_TRANSITION not in condition:
                old = old_by_type.get(condition.get("type"))
                condition = dict(condition)
                if old and old.get("status") == condition.get("status"):
                    condition[LAST_TRANSITION] = old.get(LAST_TRANSITION) or now
                else:
                    condition[LAST_TRANSITION] = now
            completed.append(condition)
        new["conditions"] = completed
    return new


def apply_merge_patch(target, patch):
    """``target`` after a JSON merge patch (RFC 7386): dicts merge, null
    deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result
