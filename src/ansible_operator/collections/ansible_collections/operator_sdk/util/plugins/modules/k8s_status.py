#!/usr/bin/python
"""operator_sdk.util.k8s_status: update the status of a Kubernetes object."""

from __future__ import annotations

import copy
import datetime
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.operator_sdk.util.plugins.module_utils.k8s_auth import (
    auth_argument_spec,
    dynamic_client,
)

try:
    from kubernetes.dynamic.exceptions import (
        ConflictError,
        DynamicApiError,
        NotFoundError,
        ResourceNotFoundError,
    )

    K8S_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - reported by fail_json
    K8S_IMPORT_ERROR = traceback.format_exc()

DOCUMENTATION = r"""
module: k8s_status
short_description: Update the status of a Kubernetes object
version_added: "0.1.0"
description:
  - Merges I(status) into the C(status) of a Kubernetes object and merges I(conditions)
    into C(status.conditions) by C(type). A condition's C(lastTransitionTime) is kept
    unless its C(status) changed (or it is new), when it becomes the current time.
  - Writes a JSON merge patch to the object's C(/status) subresource (the main resource
    when the kind has no status subresource), retrying on conflicts.
  - Meant for the object an Ansible operator reconciles; compatible with Operator SDK.
options:
  api_version:
    description: The object's apiVersion, like C(cache.example.com/v1alpha1).
    type: str
    required: true
    aliases: [apiVersion]
  kind:
    description: The object's kind.
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
    description: Fields to merge into the status (dicts merge, lists are replaced).
    type: dict
  conditions:
    description:
      - Conditions to merge into C(status.conditions) by C(type).
      - Each has C(type), C(status) (C(True), C(False) or C(Unknown)), and optionally
        C(reason), C(message), C(lastTransitionTime).
    type: list
    elements: dict
  replace_lists:
    description:
      - Replace C(status.conditions) given inside I(status) as a whole, rather than merge
        them by type.
    type: bool
    default: false
  force:
    description:
      - Replace the whole status with I(status) and I(conditions) instead of merging.
    type: bool
    default: false
  kubeconfig:
    description:
      - Path to a kubeconfig file. Defaults to C(K8S_AUTH_KUBECONFIG), then the client's
        usual lookup (C(KUBECONFIG), C(~/.kube/config), in-cluster).
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
  description: The object after the update (unchanged when nothing differed).
  returned: success
  type: dict
"""

CONDITION_STATUSES = ("True", "False", "Unknown")
MAX_ATTEMPTS = 5
MERGE_PATCH = "application/merge-patch+json"


def now():
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalise_conditions(conditions):
    """Validated copies of the given conditions; raise ValueError on a bad one."""
    result = []
    for index, condition in enumerate(conditions or []):
        if not isinstance(condition, dict):
            raise ValueError(f"conditions[{index}] must be a dict, not {condition!r}")
        condition = dict(condition)
        kind = condition.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"conditions[{index}] needs a 'type'")
        status = condition.get("status")
        if isinstance(status, bool):
            status = "True" if status else "False"
        if status not in CONDITION_STATUSES:
            raise ValueError(
                f"condition {kind!r} has status {condition.get('status')!r}: "
                "it must be one of True, False or Unknown"
            )
        condition["status"] = status
        result.append(condition)
    return result


def merge_conditions(current, given, timestamp):
    """``current`` conditions with ``given`` merged in by type."""
    merged = [dict(c) for c in current or [] if isinstance(c, dict)]
    by_type = {c.get("type"): c for c in merged}
    for condition in given:
        old = by_type.get(condition["type"])
        if old is None:
            new = dict(condition)
            new.setdefault("lastTransitionTime", timestamp)
            merged.append(new)
            by_type[new["type"]] = new
            continue
        explicit = "lastTransitionTime" in condition
        changed = old.get("status") != condition["status"]
        old.update(condition)
        if not explicit and (changed or not old.get("lastTransitionTime")):
            old["lastTransitionTime"] = timestamp
    return merged


def merge_dicts(base, overlay):
    """``base`` with ``overlay`` merged in: dicts merge, anything else is replaced."""
    result = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge_dicts(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def desired_status(current, params, timestamp):
    status = copy.deepcopy(params.get("status") or {})
    conditions = normalise_conditions(params.get("conditions"))
    current = current if isinstance(current, dict) else {}
    old_conditions = current.get("conditions") or []
    inline = status.pop("conditions", None)
    if params["force"]:
        new = status
        given = normalise_conditions(inline) + conditions
        if inline is not None or conditions:
            # Only the given conditions survive; each keeps its transition time when
            # its status did not change.
            merged = merge_conditions(old_conditions, given, timestamp)
            keep = {c["type"] for c in given}
            new["conditions"] = [c for c in merged if c.get("type") in keep]
        return new
    new = merge_dicts(current, status)
    if inline is not None:
        if params["replace_lists"]:
            new["conditions"] = copy.deepcopy(inline)
        else:
            new["conditions"] = merge_conditions(
                old_conditions, normalise_conditions(inline), timestamp
            )
    if conditions:
        new["conditions"] = merge_conditions(new.get("conditions") or [], conditions, timestamp)
    return new


def write(module, resource, obj, new_status):
    """Write ``new_status``; return the updated object as a dict."""
    metadata = obj.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    targets = []
    status_resource = resource.subresources.get("status")
    if status_resource is not None:
        targets.append(status_resource)
    targets.append(resource)
    last_error = None
    for target in targets:
        try:
            if module.params["force"]:
                body = copy.deepcopy(obj)
                body["status"] = new_status
                updated = target.replace(body=body, name=name, namespace=namespace)
            else:
                body = {
                    "metadata": {"resourceVersion": metadata.get("resourceVersion")},
                    "status": new_status,
                }
                updated = target.patch(
                    body=body, name=name, namespace=namespace, content_type=MERGE_PATCH
                )
            return updated.to_dict()
        except NotFoundError as error:
            last_error = error
            continue
    raise last_error


def main():
    argument_spec = {
        "api_version": {"type": "str", "required": True, "aliases": ["apiVersion"]},
        "kind": {"type": "str", "required": True},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str"},
        "status": {"type": "dict"},
        "conditions": {"type": "list", "elements": "dict"},
        "replace_lists": {"type": "bool", "default": False},
        "force": {"type": "bool", "default": False},
    }
    argument_spec.update(auth_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if K8S_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
    params = module.params
    try:
        normalise_conditions(params.get("conditions"))
        normalise_conditions((params.get("status") or {}).get("conditions"))
    except ValueError as error:
        module.fail_json(msg=f"k8s_status: {error}")

    try:
        client = dynamic_client(params)
        resource = client.resources.get(api_version=params["api_version"], kind=params["kind"])
    except ResourceNotFoundError:
        module.fail_json(
            msg=f"k8s_status: the API server does not serve kind {params['kind']} "
            f"in {params['api_version']}"
        )
    except Exception as error:
        module.fail_json(msg=f"k8s_status: cannot reach the API server: {error}")

    namespace = params.get("namespace")
    where = f"{params['kind']} {namespace + '/' if namespace else ''}{params['name']}"
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            obj = resource.get(name=params["name"], namespace=params.get("namespace")).to_dict()
        except NotFoundError:
            if module.check_mode:
                # Checking an object not created yet (`reconcile --check -f`):
                # its status would be written once it exists.
                module.exit_json(changed=True, result={})
            module.fail_json(msg=f"k8s_status: {where} not found")
        except DynamicApiError as error:
            module.fail_json(msg=f"k8s_status: reading {where} failed: {error.summary()}")
        current = obj.get("status") or {}
        try:
            new_status = desired_status(current, params, now())
        except ValueError as error:
            module.fail_json(msg=f"k8s_status: {error}")
        if new_status == current:
            module.exit_json(changed=False, result=obj)
        if module.check_mode:
            obj["status"] = new_status
            module.exit_json(changed=True, result=obj)
        try:
            updated = write(module, resource, obj, new_status)
        except ConflictError:
            if attempt == MAX_ATTEMPTS:
                module.fail_json(
                    msg=f"k8s_status: {where} kept changing; gave up after {MAX_ATTEMPTS} conflicts"
                )
            continue
        except DynamicApiError as error:
            module.fail_json(
                msg=f"k8s_status: updating the status of {where} failed: {error.summary()}"
            )
        module.exit_json(changed=True, result=updated)


if __name__ == "__main__":
    main()
