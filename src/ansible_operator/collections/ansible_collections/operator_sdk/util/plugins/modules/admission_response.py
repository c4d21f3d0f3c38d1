#!/usr/bin/python
"""operator_sdk.util.admission_response: a webhook role's answer to an admission request.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: admission_response
short_description: Answer the admission request an ansible-operator webhook role was run for
version_added: "0.2.0"
description:
  - In a role or playbook that serves an admission webhook declared in C(watches.yaml)
    (C(- webhook:)), says whether the request is allowed and, for a mutating webhook, how the
    object changes. The operator reads the answer from the run's events and sends it to the
    API server; the module changes nothing itself.
  - The first C(admission_response) task that runs is the answer; later ones are ignored,
    so a denial guarded by C(when) can come before a final C(allowed=true).
  - A run that fails, times out or ends without an answer gets the webhook's
    C(failurePolicy) (C(Fail) rejects the request with the reason, C(Ignore) admits it).
options:
  allowed:
    description: Whether the request is admitted.
    type: bool
    default: true
  message:
    description:
      - Why, shown to whoever made the request (C(kubectl) prints it after
        C(admission webhook "<name>" denied the request:)).
    type: str
  reason:
    description: A machine-readable reason for a denial, as a Kubernetes Status carries it.
    type: str
  code:
    description: The HTTP status of a denial.
    type: int
    default: 403
  object:
    description:
      - Mutating webhooks only. The whole object as it should be admitted; the operator
        computes the JSON patch from the object in the request.
    type: dict
  patch:
    description:
      - Mutating webhooks only. A JSON patch (RFC 6902) to apply to the object, instead of
        C(object).
    type: list
    elements: dict
  warnings:
    description: Warnings for the client (C(kubectl) prints each as C(Warning:)).
    type: list
    elements: str
    default: []
  audit_annotations:
    description: Annotations added to the request's audit event.
    type: dict
    default: {}
author:
  - ansible-operator
"""

EXAMPLES = r"""
- name: Refuse more than five replicas
  operator_sdk.util.admission_response:
    allowed: false
    message: "replicas must be at most 5, not {{ admission.object.spec.replicas }}"
  when: admission.object.spec.replicas > 5

- name: Add a label
  operator_sdk.util.admission_response:
    object: >-
      {{ admission.object
         | combine({'metadata': {'labels': {'checked': 'yes'}}}, recursive=True) }}
"""

RETURN = r"""
admission_response:
  description: The answer as the operator reads it.
  returned: success
  type: dict
  sample: {"allowed": false, "message": "replicas must be at most 5", "code": 403}
"""

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


def main():
    module = AnsibleModule(
        argument_spec={
            "allowed": {"type": "bool", "default": True},
            "message": {"type": "str"},
            "reason": {"type": "str"},
            "code": {"type": "int", "default": 403},
            "object": {"type": "dict"},
            "patch": {"type": "list", "elements": "dict"},
            "warnings": {"type": "list", "elements": "str", "default": []},
            "audit_annotations": {"type": "dict", "default": {}},
        },
        mutually_exclusive=[("object", "patch")],
        supports_check_mode=True,
    )
    params = module.params
    if params["patch"] is not None:
        problem = check_patch(params["patch"])
        if problem:
            module.fail_json(msg=f"invalid patch: {problem}")
            return
    if not 400 <= params["code"] <= 599:
        module.fail_json(msg=f"code must be an HTTP error status (400-599), not {params['code']}")
        return
    answer = {"allowed": params["allowed"], "code": params["code"]}
    for key in ("message", "reason", "object", "patch"):
        if params[key] is not None:
            answer[key] = params[key]
    answer["warnings"] = [str(warning) for warning in params["warnings"]]
    answer["audit_annotations"] = {
        str(key): str(value) for key, value in params["audit_annotations"].items()
    }
    module.exit_json(changed=False, admission_response=answer)


if __name__ == "__main__":
    main()
