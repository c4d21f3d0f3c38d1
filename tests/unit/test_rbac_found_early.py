"""RBAC found early, without a cluster: `--as` is checked and sent as
Impersonate-User on every request, and a 403 in a run becomes a sentence that
says who may not do what, where, and which file to change."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from ansible_operator.commands.reconcile import add_reconcile_arguments, settings_of
from ansible_operator.commands.run import add_run_arguments
from ansible_operator.commands.run import settings_of as run_settings_of
from ansible_operator.kube.config import KubeConfig
from ansible_operator.kube.credentials import NoCredentials
from ansible_operator.kube.impersonation import impersonated_user
from ansible_operator.runner.events import NO_LOG_MESSAGE, EventFold, RunSummary
from ansible_operator.runner.rbac_refusal import (
    RbacRefusal,
    Refusals,
    rbac_refusal,
    refusal_in_answer,
)

SA = "system:serviceaccount:ops:memcached-operator"
DEPLOYMENTS = (
    f'deployments.apps is forbidden: User "{SA}" cannot create resource "deployments" '
    'in API group "apps" in the namespace "team"'
)
NAMESPACES = (
    f'namespaces "team" is forbidden: User "{SA}" cannot get resource "namespaces" '
    'in API group "" at the cluster scope'
)


def module_error(action: str, api_message: str) -> str:
    """kubernetes.core's message for a refused request: the API server's Status
    JSON in a bytes repr (`"Failed to create object: {0}".format(e.body)`)."""
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": api_message,
        "reason": "Forbidden",
        "code": 403,
    }
    return f"Failed to {action} object: {json.dumps(status).encode()}"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (DEPLOYMENTS, RbacRefusal(SA, "create", "apps", "deployments", "team")),
        (
            module_error("create", DEPLOYMENTS),
            RbacRefusal(SA, "create", "apps", "deployments", "team"),
        ),
        (
            module_error("retrieve requested", NAMESPACES),
            RbacRefusal(SA, "get", "", "namespaces", ""),
        ),
        (
            json.dumps({"msg": module_error("patch", DEPLOYMENTS.replace("create", "patch"))}),
            RbacRefusal(SA, "patch", "apps", "deployments", "team"),
        ),
        (
            DEPLOYMENTS.replace('"deployments"', '"deployments/scale"')
            + ': RBAC: role.rbac.authorization.k8s.io "gone" not found',
            RbacRefusal(SA, "create", "apps", "deployments/scale", "team"),
        ),
        ("Failed to create object: 422 Unprocessable Entity", None),
        ("", None),
    ],
)
def test_the_api_servers_refusal_is_read_however_the_module_quoted_it(
    message: str, expected: RbacRefusal | None
) -> None:
    assert rbac_refusal(message) == expected


@pytest.mark.parametrize(
    ("refusal", "sentence"),
    [
        (
            RbacRefusal(SA, "create", "apps", "deployments", "team"),
            f"forbidden: the operator's identity {SA} may not create apps/deployments in "
            'namespace team; add the rule {apiGroups: ["apps"], resources: [deployments], '
            "verbs: [create]} to config/rbac/role.yaml "
            "(`ansible-operator check --fix-rbac` adds those it can see in the roles)",
        ),
        (
            RbacRefusal(SA, "list", "", "namespaces", ""),
            f"forbidden: the operator's identity {SA} may not list namespaces at the "
            'cluster scope; add the rule {apiGroups: [""], resources: [namespaces], '
            "verbs: [list]} to config/rbac/role.yaml "
            "(`ansible-operator check --fix-rbac` adds those it can see in the roles)",
        ),
    ],
)
def test_a_refusal_says_who_may_not_do_what_where_and_which_file_to_change(
    refusal: RbacRefusal, sentence: str
) -> None:
    assert refusal.describe() == sentence


def failed_run(
    result: dict[str, Any], refusals: Refusals | None = None, **times: str
) -> RunSummary:
    summary = RunSummary(fold=EventFold(refusals=refusals or Refusals()))
    summary.add(
        {
            "event": "runner_on_failed",
            "event_data": {
                "task": "Create the Deployment",
                "task_path": "/nowhere/roles/web/tasks/main.yml:4",
                "task_action": "kubernetes.core.k8s",
                "res": result,
                **times,
            },
        }
    )
    summary.add(
        {"event": "playbook_on_stats", "event_data": {"failures": {"localhost": 1}}},
    )
    return summary


def test_a_forbidden_task_fails_with_its_location_then_what_to_change() -> None:
    summary = failed_run(
        {"msg": module_error("create", DEPLOYMENTS), "error": 403, "reason": "Forbidden"}
    )
    assert summary.failure_message == (
        'task "Create the Deployment" (/nowhere/roles/web/tasks/main.yml:4) failed: '
        + RbacRefusal(SA, "create", "apps", "deployments", "team").describe()
    )


SECRETS = RbacRefusal(SA, "create", "", "secrets", "team")
# A task's start and end as ansible-runner's events give them, and moments in and out.
START, END = "2026-05-01T10:00:00.000000+00:00", "2026-05-01T10:00:01.500000+00:00"
DURING, BEFORE = 1777629600.7, 1777629590.0


def test_a_no_log_task_refused_says_what_the_proxy_saw_and_no_value() -> None:
    refusals = Refusals()
    refusals.add(RbacRefusal(SA, "get", "", "configmaps", "team"), at=BEFORE)  # an earlier task's
    refusals.add(SECRETS, at=DURING)
    summary = failed_run(
        {"censored": NO_LOG_MESSAGE, "changed": False}, refusals, start=START, end=END
    )
    assert summary.failure_message == (
        'task "Create the Deployment" (/nowhere/roles/web/tasks/main.yml:4) failed: '
        + SECRETS.describe()
        + " (its output is hidden by no_log; the operator's API proxy saw this)"
    )


def test_a_no_log_task_failing_otherwise_stays_hidden() -> None:
    refusals = Refusals()
    refusals.add(SECRETS, at=BEFORE)
    summary = failed_run({"censored": NO_LOG_MESSAGE}, refusals, start=START, end=END)
    assert summary.failure_message.endswith(f"failed: {NO_LOG_MESSAGE}")


def test_several_refusals_of_one_task_name_each_and_each_rule() -> None:
    refusals = Refusals()
    refusals.add(SECRETS, at=DURING)
    refusals.add(RbacRefusal(SA, "get", "", "secrets", "team"), at=DURING + 0.1)
    message = failed_run({"censored": NO_LOG_MESSAGE}, refusals, start=START, end=END)
    assert (
        f"forbidden: the operator's identity {SA} may not create secrets in namespace team; "
        f"the operator's identity {SA} may not get secrets in namespace team; add the rules "
        '{apiGroups: [""], resources: [secrets], verbs: [create]}, '
        '{apiGroups: [""], resources: [secrets], verbs: [get]} to config/rbac/role.yaml'
    ) in message.failure_message


def test_the_proxy_reads_a_refusal_from_the_api_servers_answer_only_for_rbac() -> None:
    status = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": DEPLOYMENTS}
    assert refusal_in_answer(json.dumps(status).encode()) == RbacRefusal(
        SA, "create", "apps", "deployments", "team"
    )
    webhook = status | {"message": 'admission webhook "x" denied the request: no'}
    assert refusal_in_answer(json.dumps(webhook).encode()) is None
    assert refusal_in_answer(b"<html>") is None
    assert refusal_in_answer(None) is None


def test_a_task_failing_otherwise_keeps_its_own_message() -> None:
    summary = failed_run({"msg": "Failed to create object: 422 Unprocessable Entity"})
    assert summary.failure_message.endswith(
        "failed: Failed to create object: 422 Unprocessable Entity"
    )


@pytest.mark.parametrize(
    "user", [SA, "jane@example.com", "system:serviceaccount:ns:sa-1", " system:admin "]
)
def test_as_takes_a_user_or_a_service_accounts_full_name(user: str) -> None:
    assert impersonated_user(user) == user.strip()


@pytest.mark.parametrize(
    "given",
    ["", "system:serviceaccount:ops", "system:serviceaccount:ops:", "system:serviceaccount:a:b:c"],
)
def test_as_refuses_a_service_account_name_missing_a_part(given: str) -> None:
    with pytest.raises(ValueError, match="--as"):
        impersonated_user(given)


def test_run_and_reconcile_take_as_and_refuse_a_malformed_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_parser, reconcile_parser = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_run_arguments(run_parser)
    add_reconcile_arguments(reconcile_parser)
    assert run_settings_of(run_parser.parse_args(["--as", SA])).watching.impersonate == SA
    assert run_settings_of(run_parser.parse_args([])).watching.impersonate is None
    reconcile_args = reconcile_parser.parse_args(["Memcached/m", "--as", SA])
    assert settings_of(reconcile_args).watching.impersonate == SA
    with pytest.raises(SystemExit):
        run_parser.parse_args(["--as", "system:serviceaccount:ops"])
    assert "system:serviceaccount:NAMESPACE:NAME" in capsys.readouterr().err


async def test_every_request_acts_as_the_identity_given() -> None:
    config = KubeConfig(server="https://127.0.0.1:1", ssl=False, credentials=NoCredentials())
    assert "Impersonate-User" not in await config.auth_headers()
    config.impersonate = SA
    assert await config.auth_headers() == {"Impersonate-User": SA}


def test_reconcile_help_explains_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_reconcile_arguments(parser)
    explained = {
        option
        for action in parser._actions
        if action.help
        for option in action.option_strings or [action.dest]
    }
    flags = {option for action in parser._actions for option in action.option_strings}
    assert flags <= explained
