"""The answer of `operator_sdk.util.admission_response`, checked and shaped: shared by the
action plugin (what runs: in the controller, no module process per request) and the module
(its documentation, and the same answer wherever the action plugin is not used).

Python 3.9 syntax and library only: the module runs on the managed host's Python.
"""

from __future__ import annotations

ARGUMENT_SPEC = {
    "allowed": {"type": "bool", "default": True},
    "message": {"type": "str"},
    "reason": {"type": "str"},
    "code": {"type": "int", "default": 403},
    "object": {"type": "dict"},
    "patch": {"type": "list", "elements": "dict"},
    "warnings": {"type": "list", "elements": "str", "default": []},
    "audit_annotations": {"type": "dict", "default": {}},
}
MUTUALLY_EXCLUSIVE = [("object", "patch")]
PATCH_OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")


def check_patch(patch):
    """The problem with a JSON patch, or None."""
    for index, operation in enumerate(patch):
        where = f"patch[{index}]"
        if operation.get("op") not in PATCH_OPERATIONS:
            return f"{where}: 'op' must be one of {', '.join(PATCH_OPERATIONS)}"
        if not isinstance(operation.get("path"), str):
            return f"{where}: 'path' must be a JSON pointer string such as /metadata/labels"
        if operation["op"] in ("add", "replace", "test") and "value" not in operation:
            return f"{where}: {operation['op']!r} needs a 'value'"
        if operation["op"] in ("move", "copy") and not isinstance(operation.get("from"), str):
            return f"{where}: {operation['op']!r} needs a 'from' pointer"
    return None


def answer_of(params):
    """(the answer as the operator reads it, None) or (None, what is wrong) for validated
    parameters."""
    if params["patch"] is not None:
        problem = check_patch(params["patch"])
        if problem:
            return None, f"invalid patch: {problem}"
    if not 400 <= params["code"] <= 599:
        return None, f"code must be an HTTP error status (400-599), not {params['code']}"
    answer = {"allowed": params["allowed"], "code": params["code"]}
    for key in ("message", "reason", "object", "patch"):
        if params[key] is not None:
            answer[key] = params[key]
    answer["warnings"] = [str(warning) for warning in params["warnings"]]
    answer["audit_annotations"] = {
        str(key): str(value) for key, value in params["audit_annotations"].items()
    }
    return answer, None
