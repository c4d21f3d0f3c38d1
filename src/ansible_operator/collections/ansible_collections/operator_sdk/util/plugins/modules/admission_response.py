#!/usr/bin/python
"""operator_sdk.util.admission_response: a webhook role's answer to an admission request.

Runs on the Python of the managed host: Python 3.9 syntax and library only. Where the
collection's action plugin of the same name is used (always, in ansible-operator's runs), this
module never runs: the action plugin answers in the controller.
"""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.operator_sdk.util.plugins.module_utils.admission import (
    ARGUMENT_SPEC,
    MUTUALLY_EXCLUSIVE,
    answer_of,
)

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


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        mutually_exclusive=MUTUALLY_EXCLUSIVE,
        supports_check_mode=True,
    )
    answer, problem = answer_of(module.params)
    if problem is not None:
        module.fail_json(msg=problem)
        return
    module.exit_json(changed=False, admission_response=answer)


if __name__ == "__main__":
    main()
