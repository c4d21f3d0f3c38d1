#!/usr/bin/python
"""A greeting, and the user id, HOME and Python the module ran with."""

from __future__ import annotations

import os
import platform

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: greet
short_description: Greet someone
description: Returns a greeting, and the user id, HOME and Python version the module ran with.
options:
  name:
    description: Who to greet.
    type: str
    required: true
author: ansible-operator tests
"""


def main() -> None:
    module = AnsibleModule(argument_spec={"name": {"type": "str", "required": True}})
    module.exit_json(
        changed=False,
        greeting=f"Hello, {module.params['name']}, from example.greeting 1.0.0",
        uid=os.getuid(),
        home=os.environ.get("HOME", ""),
        python=platform.python_version(),
    )


if __name__ == "__main__":
    main()
