"""The JSON patch (RFC 6902) from the object in a request to the object a role answered with.

The API server takes a mutating webhook's change only as a JSON patch; roles answer with the
changed object, which is easier to write in Ansible (`combine`, `set_fact`), and the operator
computes the patch. The patch touches only what changed: other webhooks' changes and fields
the role never looked at stay as they are.

- mappings: keys removed, added, or compared in depth;
- lists: compared item by item; items added at the end are appended, items dropped from the
  end removed (last first, so each index is still valid when it is removed);
- anything else that differs, type included (``1`` and ``true`` are not the same JSON), is
  replaced.
"""

from __future__ import annotations

from typing import Any

Patch = list[dict[str, Any]]


def pointer_token(key: str) -> str:
    """One JSON pointer reference token: ``~`` and ``/`` escaped (RFC 6901), so an
    annotation key such as ``goharbor.io/image-rewrite`` stays one token."""
    return key.replace("~", "~0").replace("/", "~1")


def json_patch(old: Any, new: Any, path: str = "") -> Patch:
    """Operations that turn `old` into `new`; none when they are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        return _mapping_patch(old, new, path)
    if isinstance(old, list) and isinstance(new, list):
        return _list_patch(old, new, path)
    if type(old) is type(new) and old == new:
        return []
    return [{"op": "replace", "path": path, "value": new}]


def _mapping_patch(old: dict[str, Any], new: dict[str, Any], path: str) -> Patch:
    operations: Patch = []
    for key in old:
        if key not in new:
            operations.append({"op": "remove", "path": f"{path}/{pointer_token(key)}"})
    for key, value in new.items():
        where = f"{path}/{pointer_token(key)}"
        if key in old:
            operations += json_patch(old[key], value, where)
        else:
            operations.append({"op": "add", "path": where, "value": value})
    return operations


def _list_patch(old: list[Any], new: list[Any], path: str) -> Patch:
    operations: Patch = []
    for index in range(min(len(old), len(new))):
        operations += json_patch(old[index], new[index], f"{path}/{index}")
    for index in range(len(old), len(new)):
        operations.append({"op": "add", "path": f"{path}/{index}", "value": new[index]})
    for index in range(len(old) - 1, len(new) - 1, -1):
        operations.append({"op": "remove", "path": f"{path}/{index}"})
    return operations
