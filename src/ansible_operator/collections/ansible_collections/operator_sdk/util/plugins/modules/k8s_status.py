#!/usr/bin/python
"""operator_sdk.util.k8s_status: update the status of a Kubernetes object.

Runs on the Python of the managed host: Python 3.9 syntax and library only.
"""

from __future__ import annotations

import copy
import datetime
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.operator_sdk.util.plugins.module_utils.k8s_auth import (
    KubeconfigError,
    auth_argument_spec,
    dynamic_client,
)
from ansible_collections.operator_sdk.util.plugins.module_utils.k8s_lookup import (
    error_details,
    error_summary,
    find_resource,
)
from ansible_collections.operator_sdk.util.plugins.module_utils.status_merge import (
    CONDITION_STATUSES,
    ConditionError,
    apply_merge_patch,
    replacement_status,
    split_conditions,
    status_patch,
    validate_conditions,
)

try:
    from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError, NotFoundError

    K8S_IMPORT_ERROR = None
except ImportError:  # reported by fail_json
    K8S_IMPORT_ERROR = traceback.format_exc()

DOCUMENTATION = r"""
module: k8s_status
short_description: Update the status of a Kubernetes object
version_added: "0.1.0"
description:
  - Sets I(status) keys and I(conditions) in the status of a Kubernetes object, through its
    C(/status) subresource (the object itself when its kind has none).
  - By default a JSON merge patch is sent, so status keys not given are kept, and I(conditions)
    are merged into C(status.conditions) by C(type). A given condition that differs from the
    current one of its type (in any field other than C(lastTransitionTime)) replaces it whole;
    one that does not leaves it untouched.
  - A condition written without a C(lastTransitionTime) gets one, the current condition's while
    its C(status) stays the same, else the current time. Conflicts are retried with a fresh read.
  - With I(replace), the status becomes exactly I(status) and I(conditions).
  - Compatible with the operator_sdk.util collection of Operator SDK.
extends_documentation_fragment:
  - operator_sdk.util.osdk_auth_options
options:
  api_version:
    description: The object's apiVersion, like C(cache.example.com/v1alpha1).
    type: str
    default: v1
    aliases: [api, version, apiVersion]
  kind:
    description: The object's kind, or its resource's plural, singular or short name.
    type: str
    required: true
  name:
    description: The object's name.
    type: str
    required: true
  namespace:
    description: The object's namespace (omit for cluster-scoped kinds).
    type: str
  status:
    description:
      - Keys to set in the status. Nested dicts merge, lists are replaced, C(null) removes a key.
    type: dict
  conditions:
    description:
      - Conditions to set in C(status.conditions), merged by C(type). Not together with
        C(status.conditions).
    type: list
    elements: dict
    suboptions:
      type:
        description: The condition's type.
        type: str
        required: true
      status:
        description: The condition's status.
        type: str
        required: true
        choices: ["True", "False", "Unknown"]
      reason:
        description: One CamelCase word.
        type: str
      message:
        description: A human-readable message.
        type: str
      lastHeartbeatTime:
        description: An RFC 3339 time.
        type: str
      lastTransitionTime:
        description: An RFC 3339 time; by default kept, or the current time when C(status) changes.
        type: str
  replace:
    description:
      - Replace the whole status (HTTP PUT) with I(status) and I(conditions) instead of patching.
    type: bool
    default: false
    aliases: [force]
  replace_lists:
    description:
      - Accepted for compatibility. Lists given in I(status) always replace the current ones.
    type: bool
    default: false
author:
  - ansible-operator
"""

EXAMPLES = r"""
- name: Report progress
  operator_sdk.util.k8s_status:
    api_version: cache.example.com/v1alpha1
    kind: Memcached
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      replicas: 3
    conditions:
      - type: Ready
        status: "True"
        reason: Deployed
        message: All replicas are ready
"""

RETURN = r"""
result:
  description:
    - The object after the update, or as read when nothing changed.
    - After a I(replace) that changed the status, a list holding that object (as the original).
  returned: success
  type: raw
error:
  description: The API server's answer to a failed request.
  returned: failure
  type: dict
  sample: {"status": 404, "reason": "Not Found", "body": "..."}
"""

MAX_ATTEMPTS = 5
MERGE_PATCH = "application/merge-patch+json"


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def argument_spec():
    spec = {
        "api_version": {
            "type": "str",
            "default": "v1",
            "aliases": ["api", "version", "apiVersion"],
        },
        "kind": {"type": "str", "required": True},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str"},
        "status": {"type": "dict"},
        "conditions": {
            "type": "list",
            "elements": "dict",
            "options": {
                "type": {"type": "str", "required": True},
                "status": {"type": "str", "required": True, "choices": list(CONDITION_STATUSES)},
                "reason": {"type": "str"},
                "message": {"type": "str"},
                "lastHeartbeatTime": {"type": "str"},
                "lastTransitionTime": {"type": "str"},
            },
        },
        "replace": {"type": "bool", "default": False, "aliases": ["force"]},
        "replace_lists": {"type": "bool", "default": False},
    }
    spec.update(auth_argument_spec())
    return spec


def connect(module):
    """The resource the task names; fails the task as the original does."""
    params = module.params
    try:
        client = dynamic_client(params)
    except KubeconfigError as error:
        module.fail_json(msg=f"Failed to load kubeconfig due to {error}", error=str(error))
    except Exception as error:
        module.fail_json(msg=f"Failed to get client due to {error}", error=str(error))
    try:
        resource = find_resource(client, params["kind"], params["api_version"])
    except DynamicApiError as error:
        module.fail_json(
            msg=f"Failed to discover {params['api_version']}: {error_summary(error)}",
            error=error_details(error),
        )
    except Exception as error:
        # The server unreachable: its first request is this one now.
        module.fail_json(msg=f"Failed to get client due to {error}", error=str(error))
    if resource is None:
        module.fail_json(
            msg=f"Failed to find exact match for {params['api_version']}.{params['kind']} "
            "by [kind, name, singularName, shortNames]"
        )
    return resource


def send(target, obj, status, replace):
    """PUT ``obj`` with ``status``, or merge-patch ``status``, at ``target``;
    ``obj``'s resourceVersion makes a concurrent change a conflict."""
    metadata = obj.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if replace:
        body = copy.deepcopy(obj)
        body["status"] = status
        return target.replace(body=body, name=name, namespace=namespace).to_dict()
    body = {"metadata": {"resourceVersion": metadata.get("resourceVersion")}, "status": status}
    return target.patch(
        body=body, name=name, namespace=namespace, content_type=MERGE_PATCH
    ).to_dict()


def write(resource, obj, status, replace):
    """Write ``status`` (the whole of it with ``replace``, else as a merge
    patch); return the updated object as a dict."""
    status_resource = resource.subresources.get("status")
    if status_resource is not None:
        try:
            return send(status_resource, obj, status, replace)
        except NotFoundError:
            pass  # served without /status after all: the status is in the object
    return send(resource, obj, status, replace)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    if K8S_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
    params = module.params
    try:
        conditions = validate_conditions(params.get("conditions"))
    except ConditionError as error:
        module.fail_json(msg="The specified conditions failed to validate", error=str(error))
    try:
        given = split_conditions(params.get("status"), conditions)
    except ConditionError as error:
        module.fail_json(msg=str(error))
    replace = params["replace"]
    resource = connect(module)

    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            obj = resource.get(name=params["name"], namespace=params.get("namespace")).to_dict()
        except DynamicApiError as error:
            if module.check_mode and error.status == 404:
                # Checking an object not created yet (`reconcile --check -f`):
                # its status would be written once it exists.
                module.exit_json(changed=True, result={})
            module.fail_json(msg="Failed to retrieve requested object", error=error_details(error))
        current = obj.get("status") or {}
        obj["status"] = current
        if replace:
            written = replacement_status(current, given, now())
            new_status = written
        elif given:
            written = status_patch(current, given, now())
            new_status = apply_merge_patch(current, written)
        else:
            written = new_status = current
        if new_status == current:
            module.exit_json(changed=False, result=obj)
        if module.check_mode:
            obj["status"] = new_status
            module.exit_json(changed=True, result=[obj] if replace else obj)
        try:
            updated = write(resource, obj, written, replace)
        except ConflictError as error:
            if attempt < MAX_ATTEMPTS:
                continue
            module.fail_json(
                msg=f"Failed to replace status: {error_summary(error)}",
                error=error_details(error),
            )
        except DynamicApiError as error:
            module.fail_json(
                msg=f"Failed to replace status: {error_summary(error)}",
                error=error_details(error),
            )
        # The original returns a one-element list after a replace; roles read result[0].
        module.exit_json(changed=True, result=[updated] if replace else updated)


if __name__ == "__main__":
    main()
