"""From a role's run to the AdmissionResponse the API server gets.

The role answers with `operator_sdk.util.admission_response`; the first such task that
succeeds is the answer (a denial guarded by `when` may come before a final `allowed: true`).
A run that fails, times out or ends without an answer, or an answer the webhook may not give
(a validating webhook changing the object), gets the webhook's failure policy: `Fail` rejects
the request with the reason as its message, `Ignore` admits it with the reason as a warning.
Pure functions over plain data: table-tested without Ansible.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.project import reserved_vars
from ansible_operator.project.webhook_entries import Webhook
from ansible_operator.webhooks.patch import json_patch
from ansible_operator.webhooks.review import AdmissionRequest

ANSWER_ACTIONS = frozenset({"admission_response", "operator_sdk.util.admission_response"})
ANSWER_EVENTS = frozenset({"runner_on_ok", "runner_item_on_ok"})
ANSWER_KEY = "admission_response"
FAILURE_CODE = 500  # a failure of the webhook itself, not a decision about the object


@dataclass(frozen=True)
class Answer:
    """What the role said (the module's result, validated there)."""

    allowed: bool
    message: str = ""
    reason: str = ""
    code: int = 403
    obj: dict[str, Any] | None = None
    patch: list[dict[str, Any]] | None = None
    warnings: tuple[str, ...] = ()
    audit_annotations: dict[str, str] = field(default_factory=dict)


def answer_from_event(event: Mapping[str, Any]) -> Answer | None:
    """The answer an `admission_response` task's event carries, if it is one."""
    if event.get("event") not in ANSWER_EVENTS:
        return None
    data = event.get("event_data") or {}
    if data.get("task_action") not in ANSWER_ACTIONS:
        return None
    result = data.get("res")
    answer = result.get(ANSWER_KEY) if isinstance(result, Mapping) else None
    if not isinstance(answer, Mapping) or not isinstance(answer.get("allowed"), bool):
        return None
    obj = answer.get("object")
    patch = answer.get("patch")
    return Answer(
        allowed=answer["allowed"],
        message=str(answer.get("message") or ""),
        reason=str(answer.get("reason") or ""),
        code=int(answer.get("code") or 403),
        obj=dict(obj) if isinstance(obj, Mapping) else None,
        patch=list(patch) if isinstance(patch, list) else None,
        warnings=tuple(str(w) for w in answer.get("warnings") or ()),
        audit_annotations={
            str(k): str(v) for k, v in (answer.get("audit_annotations") or {}).items()
        },
    )


@dataclass(frozen=True)
class RunOutcome:
    """How the role's run went: its answer, and why it failed ("" when it did not)."""

    answer: Answer | None
    failure: str = ""
    duration: float = 0.0
    ident: str = ""


@dataclass(frozen=True)
class Decision:
    """The AdmissionResponse, and why the failure policy decided it (None: the role did)."""

    response: dict[str, Any]
    policy_reason: str | None = None

    @property
    def allowed(self) -> bool:
        return bool(self.response.get("allowed"))

    @property
    def patched(self) -> bool:
        return "patch" in self.response


def refusal(webhook: Webhook, request: AdmissionRequest) -> Decision | None:
    """A request whose data may not reach Ansible is denied, whatever the failure policy:
    this is the webhook's answer, not a failure of its role (reserved_vars.py)."""
    if not request.refused:
        return None
    message = (
        f"webhook {webhook.name}: the request's data may not reach Ansible: "
        f"{reserved_vars.describe(list(request.refused))}"
    )
    response = {
        "uid": request.uid,
        "allowed": False,
        "status": {"code": 400, "reason": "BadRequest", "message": message},
    }
    return Decision(response)


def decide(webhook: Webhook, request: AdmissionRequest, outcome: RunOutcome) -> Decision:
    refused = refusal(webhook, request)
    if refused is not None:
        return refused
    if outcome.failure:
        return _by_policy(webhook, request, outcome.failure)
    answer = outcome.answer
    if answer is None:
        return _by_policy(
            webhook,
            request,
            "the role ended without an answer (no operator_sdk.util.admission_response task ran)",
        )
    changes = answer.obj is not None or answer.patch is not None
    if changes and not webhook.mutating:
        return _by_policy(
            webhook,
            request,
            "the role answered with a changed object, but a validating webhook may not change it",
        )
    response: dict[str, Any] = {"uid": request.uid, "allowed": answer.allowed}
    if not answer.allowed:
        status: dict[str, Any] = {"code": answer.code}
        if answer.message:
            status["message"] = answer.message
        if answer.reason:
            status["reason"] = answer.reason
        response["status"] = status
    elif changes:
        if answer.patch is not None:
            patch = answer.patch
        elif request.obj is None:
            return _by_policy(
                webhook,
                request,
                f"the role answered with an object, but a {request.operation} request has "
                "none to change",
            )
        else:
            patch = json_patch(request.obj, answer.obj)
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if answer.warnings:
        response["warnings"] = list(answer.warnings)
    if answer.audit_annotations:
        response["auditAnnotations"] = dict(answer.audit_annotations)
    return Decision(response)


def _by_policy(webhook: Webhook, request: AdmissionRequest, reason: str) -> Decision:
    said = f"webhook {webhook.name}: {reason}"
    if webhook.failure_policy == "Ignore":
        response = {
            "uid": request.uid,
            "allowed": True,
            "warnings": [f"{said}; admitted (failurePolicy Ignore)"],
        }
    else:
        response = {
            "uid": request.uid,
            "allowed": False,
            "status": {"code": FAILURE_CODE, "reason": "InternalError", "message": said},
        }
    return Decision(response, policy_reason=reason)
