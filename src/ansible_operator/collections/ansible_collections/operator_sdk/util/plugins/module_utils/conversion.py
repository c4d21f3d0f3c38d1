"""The answer of `operator_sdk.util.conversion_response`, checked and shaped: shared by the
action plugin (what runs: in the controller, no module process per review) and the module
(its documentation, and the same answer wherever the action plugin is not used).

Python 3.9 syntax and library only: the module runs on the managed host's Python.
"""

from __future__ import annotations

ARGUMENT_SPEC = {
    "objects": {"type": "list", "elements": "dict", "required": True},
}


def answer_of(params):
    """(the answer as the operator reads it, None) or (None, what is wrong)."""
    objects = params["objects"]
    for index, obj in enumerate(objects):
        if not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("metadata"), dict):
            return None, (
                f"objects[{index}] is no Kubernetes object (it needs apiVersion and metadata)"
            )
    return {"objects": objects}, None
