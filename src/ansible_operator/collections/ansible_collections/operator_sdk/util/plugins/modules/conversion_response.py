#!/usr/bin/python
"""operator_sdk.util.conversion_response: a conversion role's answer to a ConversionReview.

Runs on the Python of the managed host: Python 3.9 syntax and library only. Where the
collection's action plugin of the same name is used (always, in ansible-operator's runs), this
module never runs: the action plugin answers in the controller.
"""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.operator_sdk.util.plugins.module_utils.conversion import (
    ARGUMENT_SPEC,
    answer_of,
)

DOCUMENTATION = r"""
module: conversion_response
short_description: Answer the conversion an ansible-operator conversion role was run for
version_added: "0.3.0"
description:
  - In a role or playbook that converts a kind's objects between versions, declared in
    C(watches.yaml) (C(- conversion:), a version with C(role:)), gives the objects converted.
    The operator reads them from the run's events, checks them and sends them to the API
    server; the module changes nothing itself.
  - The role gets C(conversion.objects), every object of the review in C(conversion.from)
    (its version) and returns them in C(conversion.to), in the same order, each with the
    C(apiVersion) C(conversion.desired_api_version), the same kind, uid, name and namespace,
    and no change to metadata but labels and annotations. Anything else refuses the whole
    review with a message naming the C(watches.yaml) entry.
  - The first C(conversion_response) task that runs is the answer.
options:
  objects:
    description: The objects converted, in the order given.
    type: list
    elements: dict
    required: true
author:
  - ansible-operator
"""

EXAMPLES = r"""
- name: The objects in the version asked, where nothing else changes
  operator_sdk.util.conversion_response:
    objects: >-
      {{ conversion.objects
         | map('combine', {'apiVersion': conversion.desired_api_version}) }}
"""

RETURN = r"""
conversion_response:
  description: The answer as the operator reads it.
  returned: success
  type: dict
"""


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    answer, problem = answer_of(module.params)
    if problem is not None:
        module.fail_json(msg=problem)
    module.exit_json(changed=False, conversion_response=answer)


if __name__ == "__main__":
    main()
