"""From an AdmissionReview to the role's variables, and from the role's run to the answer the
API server gets; the configurations that tell the API server where to call."""

from __future__ import annotations

import ast
import base64
import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from ansible_operator.project.extravars_file import HEADER
from ansible_operator.project.webhook_entries import Webhook, WebhookRule
from ansible_operator.settings import LeaderElectionSettings, Settings
from ansible_operator.testing.admission import written_only
from ansible_operator.webhooks.answer import Answer, RunOutcome, answer_from_event, decide
from ansible_operator.webhooks.configurations import (
    MUTATING,
    VALIDATING,
    Endpoint,
    by_kind,
    configuration,
)
from ansible_operator.webhooks.review import (
    ReviewError,
    admission_vars,
    parse_review,
    review_answer,
)
from ansible_operator.webhooks.runs import answer_budget
from ansible_operator.webhooks.service import parse_service, placement

MUTATE = Webhook(
    name="rewrite.example.com",
    type="mutating",
    rules=(WebhookRule(("",), ("v1",), ("pods",), ("CREATE",)),),
    role=Path("/roles/rewrite"),
    playbook=None,
    vars={"registry": "{{ registry_host }}"},
)
VALIDATE = replace(MUTATE, name="check.example.com", type="validating")
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}}


def review(**request: Any) -> bytes:
    body = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "web",
        "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["dev"]},
        "object": POD,
        "dryRun": False,
        **request,
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}
    ).encode()


REQUEST = parse_review(review(name="p"))


def test_a_review_becomes_the_request() -> None:
    request = parse_review(review(name="p", subResource="status", dryRun=True, oldObject=POD))
    assert request.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert (request.operation, request.namespace, request.name) == ("CREATE", "web", "p")
    assert request.kind == {"group": "", "version": "v1", "kind": "Pod"}
    assert request.obj == POD and request.old_object == POD
    assert request.dry_run is True and request.sub_resource == "status"
    assert request.describe() == "kind=Pod namespace=web name=p operation=CREATE"


def test_a_create_with_generate_name_is_named_by_its_prefix_in_logs() -> None:
    request = parse_review(review(object={"metadata": {"generateName": "web-"}}))
    assert request.name == "" and request.shown_name == "web-*"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{", "the body is not JSON"),
        (b"[]", "the body is not a JSON object"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}),
            "expected kind AdmissionReview, apiVersion admission.k8s.io/v1; got kind "
            "'AdmissionReview', apiVersion 'admission.k8s.io/v1beta1'",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "the AdmissionReview has no request",
        ),
        (review(uid=""), "request.uid is missing"),
        (review(object=["not", "an", "object"]), "request.object must be an object"),
    ],
)
def test_what_is_no_review_is_refused_with_the_reason(body: bytes | str, problem: str) -> None:
    raw = body.encode() if isinstance(body, str) else body
    with pytest.raises(ReviewError, match="^" + problem.replace("(", r"\(").replace(")", r"\)")):
        parse_review(raw)


def test_the_role_gets_the_request_as_unsafe_data_and_the_webhook_vars_as_written() -> None:
    request = parse_review(
        review(name="p", object={"metadata": {"name": "{{ lookup('pipe', 'id') }}"}})
    )
    variables = admission_vars(request, MUTATE, read_back=written_only)
    # The request's data goes to the file Ansible reads as unsafe data, whole.
    assert variables.cluster is not None
    cluster = variables.cluster.variables
    admission = cluster["admission"]
    assert admission["operation"] == "CREATE"
    assert admission["object"] == {"metadata": {"name": "{{ lookup('pipe', 'id') }}"}}
    assert admission["user_info"]["groups"] == ["dev"]
    assert admission["dry_run"] is False and admission["old_object"] is None
    assert set(admission) == {
        "uid",
        "operation",
        "kind",
        "resource",
        "sub_resource",
        "namespace",
        "name",
        "object",
        "old_object",
        "user_info",
        "dry_run",
        "options",
        "webhook",
    }
    assert cluster["ansible_operator_meta"] == {"name": "p", "namespace": "web"}
    assert variables.cluster.encoded.startswith(HEADER + b"!unsafe\n")
    # The author's: a file of their own, templated.
    assert variables.author == {"registry": "{{ registry_host }}"}


def answer_event(answer: dict[str, Any], action: str = "operator_sdk.util.admission_response"):
    return {
        "event": "runner_on_ok",
        "event_data": {"task_action": action, "res": {"admission_response": answer}},
    }


def test_the_answer_is_read_from_the_modules_event() -> None:
    event = answer_event(
        {
            "allowed": False,
            "message": "no",
            "code": 422,
            "warnings": ["w"],
            "audit_annotations": {"k": "v"},
        },
        action="admission_response",
    )
    assert answer_from_event(event) == Answer(
        allowed=False, message="no", code=422, warnings=("w",), audit_annotations={"k": "v"}
    )
    assert answer_from_event({**event, "event": "runner_on_failed"}) is None
    other = answer_event({"allowed": True}, action="debug")
    assert answer_from_event(other) is None
    assert answer_from_event(answer_event({"allowed": "yes"})) is None


def decided(webhook: Webhook, answer: Answer | None, failure: str = "") -> dict[str, Any]:
    return decide(webhook, REQUEST, RunOutcome(answer, failure)).response


def test_a_denial_carries_the_roles_message_reason_and_code() -> None:
    response = decided(VALIDATE, Answer(allowed=False, message="no", reason="Forbidden"))
    assert response == {
        "uid": REQUEST.uid,
        "allowed": False,
        "status": {"code": 403, "message": "no", "reason": "Forbidden"},
    }


def test_a_changed_object_becomes_a_json_patch() -> None:
    new = {**POD, "metadata": {"name": "p", "labels": {"a": "b"}}}
    response = decided(MUTATE, Answer(allowed=True, obj=new, warnings=("changed",)))
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}
    ]
    assert response["warnings"] == ["changed"]
    unchanged = decided(MUTATE, Answer(allowed=True, obj=POD))
    assert unchanged == {"uid": REQUEST.uid, "allowed": True}


def test_a_patch_given_by_the_role_is_sent_as_it_is() -> None:
    patch = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    response = decided(MUTATE, Answer(allowed=True, patch=patch))
    assert json.loads(base64.b64decode(response["patch"])) == patch


@pytest.mark.parametrize(
    ("webhook", "answer", "failure", "reason"),
    [
        (VALIDATE, None, "the role failed: boom", "the role failed: boom"),
        (
            VALIDATE,
            None,
            "",
            "the role ended without an answer (no operator_sdk.util.admission_response task ran)",
        ),
        (
            VALIDATE,
            Answer(allowed=True, obj=POD),
            "",
            "the role answered with a changed object, but a validating webhook may not change it",
        ),
        (
            VALIDATE,
            Answer(allowed=False, message="denied after all"),
            "the role failed: later task",
            "the role failed: later task",
        ),
    ],
)
def test_failure_policy_fail_rejects_with_the_reason(
    webhook: Webhook, answer: Answer | None, failure: str, reason: str
) -> None:
    decision = decide(webhook, REQUEST, RunOutcome(answer, failure))
    assert decision.policy_reason == reason
    assert decision.response == {
        "uid": REQUEST.uid,
        "allowed": False,
        "status": {
            "code": 500,
            "reason": "InternalError",
            "message": f"webhook check.example.com: {reason}",
        },
    }


def test_failure_policy_ignore_admits_with_the_reason_as_a_warning() -> None:
    ignoring = replace(VALIDATE, failure_policy="Ignore")
    decision = decide(ignoring, REQUEST, RunOutcome(None, "the role failed: boom"))
    assert decision.response == {
        "uid": REQUEST.uid,
        "allowed": True,
        "warnings": [
            "webhook check.example.com: the role failed: boom; admitted (failurePolicy Ignore)"
        ],
    }


def test_an_object_answered_to_a_delete_has_nothing_to_patch() -> None:
    delete = replace(REQUEST, operation="DELETE", obj=None, old_object=POD)
    decision = decide(MUTATE, delete, RunOutcome(Answer(allowed=True, obj=POD)))
    assert decision.policy_reason == (
        "the role answered with an object, but a DELETE request has none to change"
    )


def test_the_review_sent_back_wraps_the_response() -> None:
    assert review_answer({"uid": "u", "allowed": True}) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True},
    }


def test_the_run_answers_before_the_api_server_gives_up() -> None:
    assert answer_budget(replace(MUTATE, timeout_seconds=10)) == 9.0
    assert answer_budget(replace(MUTATE, timeout_seconds=30)) == 29.0
    assert answer_budget(replace(MUTATE, timeout_seconds=1)) == pytest.approx(0.9)


def test_configurations_say_what_the_watches_file_says() -> None:
    selected = replace(
        VALIDATE,
        namespace_selector={"matchLabels": {"a": "b"}},
        failure_policy="Ignore",
        timeout_seconds=5,
        side_effects="NoneOnDryRun",
    )
    kinds = by_kind([MUTATE, selected])
    assert kinds == {MUTATING: [MUTATE], VALIDATING: [selected]}
    endpoint = Endpoint(service=("ops", "op-webhook-service", 443))
    body = configuration(VALIDATING, "op", kinds[VALIDATING], endpoint, b"PEM")
    assert body == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "op", "labels": {"app.kubernetes.io/managed-by": "ansible-operator"}},
        "webhooks": [
            {
                "name": "check.example.com",
                "clientConfig": {
                    "service": {
                        "namespace": "ops",
                        "name": "op-webhook-service",
                        "path": "/validate/check.example.com",
                        "port": 443,
                    },
                    "caBundle": base64.b64encode(b"PEM").decode(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                        "scope": "*",
                    }
                ],
                "failurePolicy": "Ignore",
                "sideEffects": "NoneOnDryRun",
                "timeoutSeconds": 5,
                "admissionReviewVersions": ["v1"],
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {"a": "b"}},
                "objectSelector": {},
            }
        ],
    }
    url = Endpoint(url="https://127.0.0.1:9443/")
    [entry] = configuration(MUTATING, "op", [MUTATE], url, None)["webhooks"]
    assert entry["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate/rewrite.example.com"}
    assert entry["reinvocationPolicy"] == "Never"


def test_where_the_api_server_calls_and_the_names_the_certificate_is_for() -> None:
    options = Settings(leader_election=LeaderElectionSettings(id="memcached-operator"))
    in_cluster = placement(options, "memcached-system")
    assert in_cluster.endpoint == Endpoint(
        service=("memcached-system", "memcached-operator-webhook-service", 443)
    )
    assert in_cluster.names[0] == "memcached-operator-webhook-service.memcached-system.svc"
    assert in_cluster.ca_secret == ("memcached-system", "memcached-operator-webhook-ca")
    local = placement(options, None)
    assert local.endpoint is None  # the loopback URL, once the port is bound
    assert local.names == ["127.0.0.1", "localhost"] and local.ca_secret is None
    given = placement(
        replace(
            options,
            webhooks=replace(options.webhooks, url="https://host.example:8443", ca_secret="a/b"),
        ),
        None,
    )
    assert given.endpoint == Endpoint(url="https://host.example:8443")
    assert given.names[0] == "host.example" and given.ca_secret == ("a", "b")
    assert parse_service("ns/svc:8443") == ("ns", "svc", 8443)
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        parse_service("svc")


def test_the_answer_refuses_a_patch_the_api_server_would_refuse() -> None:
    module = _collection_file("module_utils/admission.py")
    assert module.check_patch([{"op": "add", "path": "/a", "value": 1}]) is None
    assert module.check_patch([{"op": "merge", "path": "/a"}]) == (
        "patch[0]: 'op' must be one of add, remove, replace, move, copy, test"
    )
    assert module.check_patch([{"op": "remove", "path": 1}]) == (
        "patch[0]: 'path' must be a JSON pointer string such as /metadata/labels"
    )
    assert module.check_patch([{"op": "remove", "path": "/a"}, {"op": "add", "path": "/b"}]) == (
        "patch[1]: 'add' needs a 'value'"
    )
    assert (
        module.check_patch([{"op": "move", "path": "/a"}])
        == "patch[0]: 'move' needs a 'from' pointer"
    )


def test_the_answer_is_shaped_as_the_operator_reads_it() -> None:
    admission = _collection_file("module_utils/admission.py")
    defaults = {key: spec.get("default") for key, spec in admission.ARGUMENT_SPEC.items()}
    answer, problem = admission.answer_of(
        defaults | {"allowed": False, "message": "no", "warnings": [1], "audit_annotations": {1: 2}}
    )
    assert problem is None
    assert answer == {
        "allowed": False,
        "code": 403,
        "message": "no",
        "warnings": ["1"],
        "audit_annotations": {"1": "2"},
    }
    assert admission.answer_of(defaults | {"code": 200}) == (
        None,
        "code must be an HTTP error status (400-599), not 200",
    )


def test_the_modules_documentation_parses_as_ansible_doc_reads_it() -> None:
    module = _documentation("admission_response")
    admission = _collection_file("module_utils/admission.py")
    options = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert set(options) == set(admission.ARGUMENT_SPEC)
    assert set(options) == {
        "allowed",
        "message",
        "reason",
        "code",
        "object",
        "patch",
        "warnings",
        "audit_annotations",
    }
    assert yaml.safe_load(module.EXAMPLES)[0]["operator_sdk.util.admission_response"]
    assert "admission_response" in yaml.safe_load(module.RETURN)


def _collection_file(relative: str) -> Any:
    """A file of the collection's plugins/ that imports nothing of Ansible's, loaded."""
    from ansible_operator.collections import COLLECTIONS_PATH

    path = Path(COLLECTIONS_PATH) / "ansible_collections/operator_sdk/util/plugins" / relative
    spec = importlib.util.spec_from_file_location(f"collection_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _documentation(name: str) -> Any:
    """A module's DOCUMENTATION, EXAMPLES and RETURN, read as ansible-doc reads them: from
    the source, without importing it."""
    from ansible_operator.collections import COLLECTIONS_PATH

    path = (
        Path(COLLECTIONS_PATH) / f"ansible_collections/operator_sdk/util/plugins/modules/{name}.py"
    )
    found = {
        target.id: node.value.value
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return SimpleNamespace(**found)
