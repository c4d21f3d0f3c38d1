#!/usr/bin/python
"""operator_sdk.util.requeue_after: ask the operator to reconcile again after a while.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: requeue_after
short_description: Ask the operator to reconcile the current object again later
version_added: "0.1.0"
description:
  - Tells ansible-operator to reconcile the object that this run is for again after
    I(time), even when the run succeeds. The operator reads the C(period) this module
    returns from the run's events; the module changes nothing.
options:
  time:
    description:
      - How long to wait, as a Go duration such as C(30s), C(1m30s), C(2h) or C(500ms).
      - A bare number means seconds.
    type: str
    required: true
author:
  - ansible-operator
"""

EXAMPLES = r"""
- name: Look again in a minute and a half
  operator_sdk.util.requeue_after:
    time: 1m30s
"""

RETURN = r"""
period:
  description: The requested period, normalised (a bare number gets an C(s) unit).
  returned: success
  type: str
  sample: 1m30s
requeue_after_seconds:
  description: The requested period in seconds.
  returned: success
  type: float
  sample: 90.0
"""

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def parse(text):
    """Return (normalised period, seconds); raise ValueError when ``text`` is no duration."""
    value = str(text).strip()
    if value.startswith("+"):
        value = value[1:]
    if not value or value.startswith("-"):
        raise ValueError("empty or negative")
    if _NUMBER.fullmatch(value):
        return value + "s", float(value)
    total = 0.0
    position = 0
    while position < len(value):
        match = _PART.match(value, position)
        if match is None:
            raise ValueError("not a duration")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return value, total


def main():
    module = AnsibleModule(
        argument_spec={"time": {"type": "str", "required": True}},
        supports_check_mode=True,
    )
    time = module.params["time"]
    try:
        period, seconds = parse(time)
    except ValueError:
        module.fail_json(
            msg=(
                f"invalid time input: {time!r} is not a duration; use one like 30s, 1m30s or 2h "
                "(units ns, us, ms, s, m, h; a bare number means seconds)"
            ),
            time=time,
        )
        return
    module.exit_json(changed=False, period=period, requeue_after_seconds=seconds)


if __name__ == "__main__":
    main()
