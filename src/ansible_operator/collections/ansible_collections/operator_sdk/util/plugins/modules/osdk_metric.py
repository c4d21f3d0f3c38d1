#!/usr/bin/python
"""operator_sdk.util.osdk_metric: update a user metric served by the operator."""

from __future__ import annotations

import http.client
import json
import os
import socket

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: osdk_metric
short_description: Update a user-defined Prometheus metric of the operator
version_added: "0.1.0"
description:
  - Sends one metric operation to the ansible-operator that runs this playbook, which
    serves the metric on its C(/metrics) endpoint. The metric is created on first use.
  - Give exactly one of I(counter), I(gauge), I(histogram) or I(summary), with exactly
    one operation in it.
  - Works only inside a run of ansible-operator (it talks to the operator over the
    unix socket named by C(ANSIBLE_OPERATOR_SOCKET)).
options:
  name:
    description: The metric's name.
    type: str
    required: true
  description:
    description: The metric's help text (used when the metric is created).
    type: str
  counter:
    description: A counter operation.
    type: dict
    suboptions:
      increment:
        description: Add one.
        type: bool
        aliases: [inc]
      add:
        description: Add this (non-negative) amount.
        type: float
  gauge:
    description: A gauge operation.
    type: dict
    suboptions:
      set:
        description: Set the gauge to this value.
        type: float
      increment:
        description: Add one.
        type: bool
        aliases: [inc]
      decrement:
        description: Subtract one.
        type: bool
        aliases: [dec]
      add:
        description: Add this amount.
        type: float
      subtract:
        description: Subtract this amount.
        type: float
        aliases: [sub]
      set_to_current_time:
        description: Set the gauge to the current Unix time.
        type: bool
  histogram:
    description: A histogram operation.
    type: dict
    suboptions:
      observe:
        description: Record this observation.
        type: float
  summary:
    description: A summary operation.
    type: dict
    suboptions:
      observe:
        description: Record this observation.
        type: float
author:
  - ansible-operator
"""

EXAMPLES = r"""
- name: Count reconciles of this kind
  operator_sdk.util.osdk_metric:
    name: my_reconciles_total
    description: Reconciles run by my role
    counter:
      increment: true

- name: Record how many replicas we manage
  operator_sdk.util.osdk_metric:
    name: my_replicas
    gauge:
      set: "{{ size }}"
"""

RETURN = r"""
metric:
  description: The payload sent to the operator.
  returned: success
  type: dict
  sample: {"name": "my_replicas", "type": "gauge", "operation": "set", "value": 3.0}
"""

SOCKET_ENV = "ANSIBLE_OPERATOR_SOCKET"
TOKEN_ENV = "ANSIBLE_OPERATOR_RUN_TOKEN"
TYPES = ("counter", "gauge", "histogram", "summary")
# Flag operations (a bool in the task) and amount operations (a number in the task).
FLAGS = {"increment", "decrement", "set_to_current_time"}


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection over a unix socket."""

    def __init__(self, path, timeout=30):
        http.client.HTTPConnection.__init__(self, "localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def payload(params):
    """The metric operation of the task; raise ValueError when it is not exactly one."""
    given = [kind for kind in TYPES if params.get(kind)]
    if len(given) != 1:
        raise ValueError(
            "give exactly one of counter, gauge, histogram or summary (got %s)"
            % (", ".join(given) or "none")
        )
    kind = given[0]
    operations = []
    for operation, value in params[kind].items():
        if value is None:
            continue
        if operation in FLAGS:
            if value:
                operations.append((operation, 1.0))
        else:
            operations.append((operation, float(value)))
    if len(operations) != 1:
        names = ", ".join(name for name, _ in operations) or "none"
        raise ValueError(f"{kind}: give exactly one operation (got {names})")
    operation, value = operations[0]
    return {
        "name": params["name"],
        "description": params.get("description") or "",
        "type": kind,
        "operation": operation,
        "value": value,
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "description": {"type": "str"},
            "counter": {
                "type": "dict",
                "options": {
                    "increment": {"type": "bool", "aliases": ["inc"]},
                    "add": {"type": "float"},
                },
            },
            "gauge": {
                "type": "dict",
                "options": {
                    "set": {"type": "float"},
                    "increment": {"type": "bool", "aliases": ["inc"]},
                    "decrement": {"type": "bool", "aliases": ["dec"]},
                    "add": {"type": "float"},
                    "subtract": {"type": "float", "aliases": ["sub"]},
                    "set_to_current_time": {"type": "bool"},
                },
            },
            "histogram": {"type": "dict", "options": {"observe": {"type": "float"}}},
            "summary": {"type": "dict", "options": {"observe": {"type": "float"}}},
        },
        supports_check_mode=True,
    )
    try:
        metric = payload(module.params)
    except ValueError as error:
        module.fail_json(msg=f"osdk_metric {module.params['name']}: {error}")
    socket_path = os.environ.get(SOCKET_ENV)
    if not socket_path:
        module.fail_json(
            msg=f"osdk_metric needs the ansible-operator runtime: {SOCKET_ENV} is not set, so this "
            "is not a run started by the operator"
        )
    if module.check_mode:
        module.exit_json(changed=True, metric=metric)

    connection = UnixHTTPConnection(socket_path)
    try:
        connection.request(
            "POST",
            "/metrics",
            body=json.dumps(metric),
            headers={
                "Content-Type": "application/json",
                "Authorization": "Bearer " + os.environ.get(TOKEN_ENV, ""),
            },
        )
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace").strip()
        status = response.status
    except (OSError, http.client.HTTPException) as error:
        module.fail_json(
            msg=f"osdk_metric {metric['name']}: cannot reach the operator at {socket_path}: {error}"
        )
    finally:
        connection.close()
    if not 200 <= status < 300:
        module.fail_json(
            msg=f"osdk_metric {metric['name']}: the operator answered {status}: {text}",
            status=status,
        )
    module.exit_json(changed=True, metric=metric)


if __name__ == "__main__":
    main()
