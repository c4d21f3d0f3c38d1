"""An AdmissionReview from the API server: what it asks, and the variables a role gets.

The role sees one variable, ``admission``, with the request's fields snake_cased
(``old_object``, ``user_info``, ``dry_run``, ``sub_resource``); the objects inside keep their
own keys, since a mutating role answers with the object as Kubernetes spells it. Everything
in it came from whoever made the request, so it reaches the run as data Ansible never
templates (project/admission.py), whatever the webhook; and a request whose data carries
Ansible's tagged-value keys or nests too deep (reserved_vars.py), or that Ansible's loader
would read otherwise than meant, is denied, never run.
The webhook's own ``vars`` are the operator author's and stay templated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.project import admission, ansible_view, reserved_vars
from ansible_operator.project.admission import RunVariables
from ansible_operator.project.ansible_view import ExtraVars
from ansible_operator.project.webhook_entries import Webhook
from ansible_operator.serving.reviews import review_request

REVIEW_API_VERSION = "admission.k8s.io/v1"


class ReviewError(ValueError):
    """The body is no AdmissionReview request we can answer."""


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    operation: str
    kind: dict[str, str]  # group, version, kind of the object
    resource: dict[str, str]  # group, version, resource
    namespace: str
    name: str
    obj: dict[str, Any] | None
    old_object: dict[str, Any] | None
    user_info: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    sub_resource: str = ""
    options: dict[str, Any] | None = None
    # Why its data may not reach Ansible (reserved_vars.py): the request is denied unrun.
    refused: tuple[reserved_vars.Refusal, ...] = ()

    @property
    def shown_name(self) -> str:
        """The name for log lines: a CREATE with generateName has none yet."""
        if self.name:
            return self.name
        generated = ((self.obj or {}).get("metadata") or {}).get("generateName")
        return f"{generated}*" if generated else ""

    def describe(self) -> str:
        """As log lines name the request."""
        return (
            f"kind={self.kind.get('kind', '')} namespace={self.namespace} "
            f"name={self.shown_name} operation={self.operation}"
        )


def _mapping(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ReviewError(f"request.{what} must be an object")
    return dict(value)


def parse_review(body: bytes) -> AdmissionRequest:
    """The request of an ``admission.k8s.io/v1`` AdmissionReview."""
    request, uid = review_request(body, "AdmissionReview", REVIEW_API_VERSION, ReviewError)
    names = ("kind", "resource", "object", "oldObject", "userInfo", "options")
    fields = {name: request.get(name) for name in names}
    refused = tuple(
        refusal
        for name, value in fields.items()
        for refusal in reserved_vars.data_refusals(
            # The objects' managedFields, as the reconciler does: depth counted once.
            reserved_vars.without_managed_fields(value) if isinstance(value, Mapping) else value,
            name,
        )
    )
    return AdmissionRequest(
        uid=uid,
        operation=str(request.get("operation") or ""),
        kind=_mapping(request.get("kind"), "kind") or {},
        resource=_mapping(request.get("resource"), "resource") or {},
        namespace=str(request.get("namespace") or ""),
        name=str(request.get("name") or ""),
        obj=_mapping(request.get("object"), "object"),
        old_object=_mapping(request.get("oldObject"), "oldObject"),
        user_info=_mapping(request.get("userInfo"), "userInfo") or {},
        dry_run=request.get("dryRun") is True,
        sub_resource=str(request.get("subResource") or ""),
        options=_mapping(request.get("options"), "options"),
        refused=refused,
    )


def admission_vars(
    request: AdmissionRequest,
    webhook: Webhook,
    read_back: Callable[[dict[str, Any]], ExtraVars] = ansible_view.read_exactly,
) -> RunVariables:
    """The variables of the run that answers `request` (RefusedData if it has refusals,
    or if Ansible would read them otherwise than meant: project/admission.py). Reads
    YAML with Ansible's loader: off the event loop."""
    if request.refused:
        raise reserved_vars.RefusedData(list(request.refused))
    from_cluster = {
        "admission": {
            "uid": request.uid,
            "operation": request.operation,
            "kind": copy.deepcopy(request.kind),
            "resource": copy.deepcopy(request.resource),
            "sub_resource": request.sub_resource,
            "namespace": request.namespace,
            "name": request.name,
            "object": copy.deepcopy(request.obj),
            "old_object": copy.deepcopy(request.old_object),
            "user_info": copy.deepcopy(request.user_info),
            "dry_run": request.dry_run,
            "options": copy.deepcopy(request.options),
            "webhook": webhook.name,
        },
        "ansible_operator_meta": {"name": request.name, "namespace": request.namespace},
    }
    return admission.admit_data(from_cluster, webhook.vars, read_back=read_back)


def review_answer(response: Mapping[str, Any]) -> dict[str, Any]:
    """The AdmissionReview sent back around a response (which carries the request's uid)."""
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": dict(response)}
