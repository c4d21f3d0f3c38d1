#!/usr/bin/python
"""operator_sdk.util.osdk_metric: update a user metric served by the operator.

Runs on the Python of the managed host: Python 3.9 syntax and standard
library only.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: osdk_metric
short_description: Update a user-defined Prometheus metric of the operator
version_added: "0.1.0"
description:
  - Sends a metric to the operator that runs this playbook, which creates it on first use and
    serves it on its metrics endpoint under exactly I(name).
  - Give one of I(counter), I(gauge), I(histogram) or I(summary). Without an operation in it the
    metric is only created (a histogram or summary observes 0); with several, the first of this
    order applies - counter C(increment), C(add); gauge C(increment), C(decrement), C(add),
    C(subtract), C(set), C(set_to_current_time). A zero C(add), C(subtract) or C(set) does nothing.
  - Inside an ansible-operator run the metric goes to that operator over its private socket.
    Elsewhere, or when I(address) is not the default, it is POSTed to I(address), as the
    original module does (the Go operator listens there).
options:
  name:
    description: The metric's name.
    type: str
    required: true
  description:
    description: The metric's help text (used when the metric is created).
    type: str
  address:
    description: The URL the metric is POSTed to outside an ansible-operator run.
    type: str
    default: http://localhost:5050/metrics
  counter:
    description: A counter.
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
    description: A gauge.
    type: dict
    suboptions:
      set:
        description: Set the gauge to this value (not 0).
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
    description: A histogram (interchangeable with a summary).
    type: dict
    suboptions:
      observe:
        description: Record this observation.
        type: float
  summary:
    description: A summary (interchangeable with a histogram).
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
    description: Replicas managed
    gauge:
      set: "{{ size }}"
"""

RETURN = r"""
status_code:
  description: The HTTP status of the operator's answer, when it refused the metric.
  returned: failure
  type: int
  sample: 400
"""

DEFAULT_ADDRESS = "http://localhost:5050/metrics"
SOCKET_ENV = "ANSIBLE_OPERATOR_SOCKET"
TOKEN_ENV = "ANSIBLE_OPERATOR_RUN_TOKEN"
TIMEOUT = 30
OPERATIONS = {
    "counter": {"increment": "bool", "add": "float"},
    "gauge": {
        "set": "float",
        "increment": "bool",
        "decrement": "bool",
        "add": "float",
        "subtract": "float",
        "set_to_current_time": "bool",
    },
    "histogram": {"observe": "float"},
    "summary": {"observe": "float"},
}
ALIASES = {"increment": ["inc"], "decrement": ["dec"], "subtract": ["sub"]}


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection over a unix socket."""

    def __init__(self, path, timeout=TIMEOUT):
        http.client.HTTPConnection.__init__(self, "localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def argument_spec():
    spec = {
        "name": {"type": "str", "required": True},
        "description": {"type": "str"},
        "address": {"type": "str", "default": DEFAULT_ADDRESS},
    }
    for kind, operations in OPERATIONS.items():
        options = {}
        for operation, value_type in operations.items():
            options[operation] = {"type": value_type}
            if operation in ALIASES:
                options[operation]["aliases"] = ALIASES[operation]
        spec[kind] = {"type": "dict", "options": options}
    return spec


def payload(params):
    """The original's payload: every given type with all its operations, unset ones null."""
    body = {"name": params["name"], "description": params.get("description") or ""}
    for kind, operations in OPERATIONS.items():
        given = params.get(kind)
        if given is not None:
            body[kind] = {operation: given.get(operation) for operation in operations}
    return body


def post_to_operator(socket_path, body):
    """POST to the operator running this playbook; return (status, text)."""
    connection = UnixHTTPConnection(socket_path)
    try:
        connection.request(
            "POST",
            "/metrics",
            body=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "Authorization": "Bearer " + os.environ.get(TOKEN_ENV, ""),
            },
        )
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def post_to_address(address, body):
    """POST to ``address`` as the original module does; return (status, text)."""
    request = urllib.request.Request(
        address,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    body = payload(module.params)
    if module.check_mode:
        module.exit_json(changed=True)
    address = module.params["address"]
    socket_path = os.environ.get(SOCKET_ENV)
    inside_operator = bool(socket_path) and address == DEFAULT_ADDRESS
    try:
        if inside_operator:
            status, text = post_to_operator(socket_path, body)
        else:
            status, text = post_to_address(address, body)
    except (OSError, ValueError, http.client.HTTPException) as error:
        where = "the operator at " + socket_path if inside_operator else address
        hint = "" if socket_path else f" (not in an ansible-operator run: {SOCKET_ENV} is unset)"
        module.fail_json(msg=f"osdk_metric {body['name']}: cannot reach {where}: {error}{hint}")
    if not 200 <= status < 300:
        # As the original: the receiver's answer as the message, and its status.
        module.fail_json(msg=text, status_code=status)
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
