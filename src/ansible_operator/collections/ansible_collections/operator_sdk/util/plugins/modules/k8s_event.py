#!/usr/bin/python
"""operator_sdk.util.k8s_event: create a Kubernetes Event."""

from __future__ import annotations

import datetime
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.operator_sdk.util.plugins.module_utils.k8s_auth import (
    auth_argument_spec,
    dynamic_client,
)

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError

    K8S_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - reported by fail_json
    K8S_IMPORT_ERROR = traceback.format_exc()

DOCUMENTATION = r"""
module: k8s_event
short_description: Create a Kubernetes Event
version_added: "0.1.0"
description:
  - Creates a core/v1 Event about I(involvedObject). When an Event of that name already
    exists, its C(count) goes up by one and its C(lastTimestamp), C(message) and
    C(reason) are updated instead.
options:
  name:
    description:
      - The Event's name. Defaults to the involved object's name with a unique suffix.
    type: str
  namespace:
    description: The Event's namespace; defaults to the involved object's.
    type: str
  message:
    description: A human-readable description of what happened.
    type: str
  reason:
    description: A short, machine-understandable reason, in UpperCamelCase.
    type: str
  type:
    description: The Event's type.
    type: str
    choices: [Normal, Warning]
    default: Normal
  reportingComponent:
    description: The controller that emitted the Event.
    type: str
    default: ""
  reportingInstance:
    description: The instance of that controller.
    type: str
    default: ""
  source:
    description: The Event's source.
    type: dict
    suboptions:
      component:
        description: The component reporting the Event.
        type: str
  involvedObject:
    description: The object the Event is about.
    type: dict
    required: true
    suboptions:
      apiVersion:
        type: str
        description: Its apiVersion.
      kind:
        type: str
        description: Its kind.
      name:
        type: str
        description: Its name.
      namespace:
        type: str
        description: Its namespace.
      uid:
        type: str
        description: Its UID.
  appendTimestamp:
    description: Append the current Unix time to I(name), making every call a new Event.
    type: bool
    default: false
  kubeconfig:
    description: Path to a kubeconfig file (C(K8S_AUTH_KUBECONFIG)).
    type: path
  context:
    description: The kubeconfig context to use (C(K8S_AUTH_CONTEXT)).
    type: str
  host:
    description: The API server URL (C(K8S_AUTH_HOST)).
    type: str
  api_key:
    description: A bearer token for the API server (C(K8S_AUTH_API_KEY)).
    type: str
  validate_certs:
    description: Whether to verify the API server's certificate (C(K8S_AUTH_VERIFY_SSL)).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: A CA bundle for the API server (C(K8S_AUTH_SSL_CA_CERT)).
    type: path
    aliases: [ssl_ca_cert]
author:
  - ansible-operator
"""

EXAMPLES = r"""
- name: Tell users the backup finished
  operator_sdk.util.k8s_event:
    name: "{{ ansible_operator_meta.name }}-backup"
    namespace: "{{ ansible_operator_meta.namespace }}"
    reason: BackupDone
    message: The nightly backup finished
    reportingComponent: memcached-operator
    involvedObject:
      apiVersion: cache.example.com/v1alpha1
      kind: Memcached
      name: "{{ ansible_operator_meta.name }}"
      namespace: "{{ ansible_operator_meta.namespace }}"
"""

RETURN = r"""
result:
  description: The Event as created or updated.
  returned: success
  type: dict
"""


def now():
    return datetime.datetime.now(datetime.UTC)


def rfc3339(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str"},
            "namespace": {"type": "str"},
            "message": {"type": "str"},
            "reason": {"type": "str"},
            "type": {"type": "str", "choices": ["Normal", "Warning"], "default": "Normal"},
            "reportingComponent": {"type": "str", "default": ""},
            "reportingInstance": {"type": "str", "default": ""},
            "source": {"type": "dict", "options": {"component": {"type": "str"}}},
            "involvedObject": {
                "type": "dict",
                "required": True,
                "options": {
                    "apiVersion": {"type": "str"},
                    "kind": {"type": "str"},
                    "name": {"type": "str"},
                    "namespace": {"type": "str"},
                    "uid": {"type": "str"},
                },
            },
            "appendTimestamp": {"type": "bool", "default": False},
            **auth_argument_spec(),
        },
        supports_check_mode=True,
    )
    if K8S_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
    params = module.params
    involved = {k: v for k, v in (params["involvedObject"] or {}).items() if v is not None}
    namespace = params.get("namespace") or involved.get("namespace") or "default"
    moment = now()
    name = params.get("name")
    if not name:
        base = involved.get("name") or "event"
        name = f"{base}.{int(moment.timestamp() * 1e9):x}"
    elif params["appendTimestamp"]:
        name = f"{name}.{int(moment.timestamp())}"

    source = {k: v for k, v in (params.get("source") or {}).items() if v is not None}
    if not source and params["reportingComponent"]:
        source = {"component": params["reportingComponent"]}
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": involved,
        "reason": params.get("reason") or "",
        "message": params.get("message") or "",
        "type": params["type"],
        "source": source,
        "reportingComponent": params["reportingComponent"],
        "reportingInstance": params["reportingInstance"],
        "firstTimestamp": rfc3339(moment),
        "lastTimestamp": rfc3339(moment),
        "count": 1,
    }
    if module.check_mode:
        module.exit_json(changed=True, result=event)

    where = f"Event {namespace}/{name}"
    try:
        events = dynamic_client(params).resources.get(api_version="v1", kind="Event")
    except Exception as error:
        module.fail_json(msg=f"k8s_event: cannot reach the API server: {error}")

    try:
        existing = events.get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        existing = None
    except DynamicApiError as error:
        module.fail_json(msg=f"k8s_event: reading {where} failed: {error.summary()}")

    try:
        if existing is None:
            result = events.create(body=event, namespace=namespace).to_dict()
        else:
            patch = {
                "count": int(existing.get("count") or 1) + 1,
                "lastTimestamp": rfc3339(moment),
                "message": event["message"],
                "reason": event["reason"],
                "type": event["type"],
            }
            result = events.patch(
                body=patch,
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
            ).to_dict()
    except DynamicApiError as error:
        module.fail_json(msg=f"k8s_event: writing {where} failed: {error.summary()}")
    module.exit_json(changed=True, result=result)


if __name__ == "__main__":
    main()
