#!/usr/bin/python
"""operator_sdk.util.k8s_event: create or update a Kubernetes Event.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

import datetime
import time
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.operator_sdk.util.plugins.module_utils.k8s_auth import (
    KubeconfigError,
    auth_argument_spec,
    dynamic_client,
)
from ansible_collections.operator_sdk.util.plugins.module_utils.k8s_lookup import (
    error_summary,
    find_resource,
)

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError

    K8S_IMPORT_ERROR = None
except ImportError:  # reported by fail_json
    K8S_IMPORT_ERROR = traceback.format_exc()

DOCUMENTATION = r"""
module: k8s_event
short_description: Create or update a Kubernetes Event
version_added: "0.1.0"
description:
  - Creates a core/v1 Event named I(name). When an Event of that name exists with the same
    I(reason), its C(count) goes up by one and its C(firstTimestamp) is kept; with another
    reason it starts again at one. Everything else is written as given.
  - The involved object is looked up (its kind may also be given as a plural, singular or short
    name) to fill in its C(uid) and C(resourceVersion), which C(kubectl describe) matches on.
  - Compatible with the operator_sdk.util collection of Operator SDK.
extends_documentation_fragment:
  - operator_sdk.util.osdk_auth_options
options:
  state:
    description: Accepted for compatibility; the Event is always created or updated.
    type: str
    default: present
    choices: [present, absent]
  merge_type:
    description: Accepted for compatibility; ignored.
    type: list
    elements: str
    choices: [json, merge, strategic-merge]
  name:
    description:
      - The Event's name. Defaults to the involved object's name with a unique suffix.
    type: str
  namespace:
    description: The Event's namespace; defaults to the involved object's, then C(default).
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
    description:
      - The controller that emitted the Event; also its C(source.component) when I(source) is
        not given.
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
    suboptions:
      apiVersion:
        type: str
        description: Its apiVersion (default C(v1)).
      kind:
        type: str
        description: Its kind, or its resource's plural, singular or short name.
      name:
        type: str
        description: Its name.
      namespace:
        type: str
        description: Its namespace (default the Event's).
      uid:
        type: str
        description: Its UID, when it cannot be looked up.
  appendTimestamp:
    description:
      - Append the current time to I(name) (as client-go does, C(.<nanoseconds in hex>)), so
        that every call creates a new Event.
    type: bool
    default: false
author:
  - ansible-operator
"""

EXAMPLES = r"""
- name: Tell users the backup finished
  operator_sdk.util.k8s_event:
    state: present
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
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def argument_spec():
    spec = {
        "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        "merge_type": {
            "type": "list",
            "elements": "str",
            "choices": ["json", "merge", "strategic-merge"],
        },
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
            "options": {
                "apiVersion": {"type": "str"},
                "kind": {"type": "str"},
                "name": {"type": "str"},
                "namespace": {"type": "str"},
                "uid": {"type": "str"},
            },
        },
        "appendTimestamp": {"type": "bool", "default": False},
    }
    spec.update(auth_argument_spec())
    return spec


def event_name(params, involved):
    """The Event's name: given, given with a time suffix, or generated."""
    suffix = f"{time.time_ns():x}"
    name = params.get("name")
    if not name:
        return f"{involved.get('name') or 'event'}.{suffix}"
    if params["appendTimestamp"]:
        return f"{name}.{suffix}"
    return name


def look_up(client, involved):
    """``involved`` with the uid and resourceVersion of the object it names,
    when that object can be read; as given otherwise."""
    if not involved.get("kind") or not involved.get("name"):
        return involved
    try:
        resource = find_resource(client, involved["kind"], involved.get("apiVersion") or "v1")
        if resource is None:
            return involved
        found = resource.get(name=involved["name"], namespace=involved.get("namespace")).to_dict()
    except DynamicApiError:
        # Gone, or not readable with the run's permissions: the Event still
        # tells what happened, without the link to the object.
        return involved
    metadata = found.get("metadata") or {}
    involved = dict(involved)
    involved["uid"] = metadata.get("uid")
    involved["resourceVersion"] = metadata.get("resourceVersion")
    return involved


def desired_event(params, name, namespace, involved, existing, moment):
    """The Event to write: counted on from ``existing`` when its reason is the same."""
    source = {k: v for k, v in (params.get("source") or {}).items() if v is not None}
    if not source and params["reportingComponent"]:
        source = {"component": params["reportingComponent"]}
    reason = params.get("reason") or ""
    count, first = 1, moment
    if existing is not None and existing.get("reason") == reason:
        count = int(existing.get("count") or 1) + 1
        first = existing.get("firstTimestamp") or moment
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": params.get("message") or "",
        "type": params["type"],
        "source": source,
        "reportingComponent": params["reportingComponent"],
        "reportingInstance": params["reportingInstance"],
        "count": count,
        "firstTimestamp": first,
        "lastTimestamp": moment,
    }


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    if K8S_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
    params = module.params
    involved = {k: v for k, v in (params.get("involvedObject") or {}).items() if v is not None}
    namespace = params.get("namespace") or involved.get("namespace") or "default"
    # The API server accepts an Event about an object of another namespace
    # (or about none) only in "default": name the Event's own namespace.
    involved.setdefault("namespace", namespace)
    name = event_name(params, involved)

    try:
        client = dynamic_client(params)
        events = find_resource(client, "Event", "v1")
        if events is None:
            raise LookupError("the server serves no v1 Event")
    except KubeconfigError as error:
        module.fail_json(msg=f"Failed to load kubeconfig due to {error}", error=str(error))
    except Exception as error:
        module.fail_json(msg=f"Failed to get client due to {error}", error=str(error))
    involved = look_up(client, involved)

    try:
        existing = events.get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        existing = None
    except DynamicApiError as error:
        module.fail_json(msg=f"Unable to create event: {error_summary(error)}")
    event = desired_event(params, name, namespace, involved, existing, now())
    if module.check_mode:
        module.exit_json(changed=True, result=event)
    try:
        if existing is None:
            result = events.create(body=event, namespace=namespace).to_dict()
        else:
            result = events.patch(
                body=event,
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
            ).to_dict()
    except DynamicApiError as error:
        module.fail_json(msg=f"Unable to create event: {error_summary(error)}")
    module.exit_json(changed=True, result=result)


if __name__ == "__main__":
    main()
