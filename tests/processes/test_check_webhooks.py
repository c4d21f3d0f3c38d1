"""`ansible-operator check` on the roles and playbooks of webhooks: loaded and checked as a
watch's are, with the variables of a webhook run known (a typo is an error, `admission`
is not), and a webhook that never answers is a warning at its entry."""

from __future__ import annotations

from pathlib import Path

from ansible_operator.commands.check import check_project
from ansible_operator.lint.findings import Finding
from ansible_operator.lint.webhook_roles import ADMISSION_KEYS
from ansible_operator.project.webhook_entries import Webhook, WebhookRule
from ansible_operator.webhooks.review import AdmissionRequest, admission_vars


def webhook_entry(name: str, kind: str, target: str, extra: str = "") -> str:
    return f"""\
- webhook:
    name: {name}.example.com
    type: {kind}
    rules:
      - apiGroups: [apps.example.com]
        apiVersions: [v1]
        resources: [apps]
        operations: [CREATE]
    {target}{extra}
"""


ANSWERING_ROLE = """\
- name: Look at what exists
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
  register: existing
- name: Remember the size
  set_fact:
    wanted: "{{ admission.object.spec.size | int }}"
- name: Loop with a name of its own
  debug:
    msg: "{{ entry }} of {{ existing.resources | length }}"
  loop: "{{ admission.object.spec.items | default([]) }}"
  loop_control:
    loop_var: entry
- name: Refuse too many
  operator_sdk.util.admission_response:
    allowed: false
    message: >-
      {% for c in admission.object.spec.containers | default([]) %}{{ c.name }} {% endfor %}
      size {{ wanted }} is more than {{ limit }} ({{ maybe_set | default('none') }}, {{ note }})
  when:
    - wanted | int > limit
    - admission.operation == 'CREATE'
    - admission.user_info.username is defined
- name: Admit the rest
  operator_sdk.util.admission_response:
    allowed: true
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def shown(findings: list[Finding], root: Path) -> list[str]:
    return [finding.format(relative_to=root) for finding in findings]


def test_a_webhook_role_using_its_run_variables_checks_clean(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": webhook_entry(
                "size", "validating", "role: size", "\n    vars:\n      limit: 5"
            ),
            "roles/size/defaults/main.yml": "note: from the defaults\n",
            "roles/size/tasks/main.yml": ANSWERING_ROLE,
        },
    )
    findings, targets = check_project(root)
    assert shown(findings, root) == []
    assert [role.name for role in targets.roles] == ["size"]


def test_names_a_webhook_run_does_not_have_are_errors_at_their_lines(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": webhook_entry(
                "size", "validating", "role: size", "\n    vars:\n      limit: 5"
            ),
            "roles/size/tasks/main.yml": """\
- name: Refuse too many
  operator_sdk.util.admission_response:
    allowed: false
    message: "{{ admision.object.spec.size }} is more than {{ limt }}"
  when: admission.objet.spec.size > limit
- name: Admit the rest
  operator_sdk.util.admission_response:
    allowed: true
""",
        },
    )
    findings, _ = check_project(root)
    assert shown(findings, root) == [
        "roles/size/tasks/main.yml:4: error: `admision` is not defined in a run of webhook "
        "size.example.com (did you mean `admission`?) (its variables: admission, "
        "ansible_operator_meta, the webhook's vars and what the role defines)",
        "roles/size/tasks/main.yml:4: error: `limt` is not defined in a run of webhook "
        "size.example.com (did you mean `limit`?) (its variables: admission, "
        "ansible_operator_meta, the webhook's vars and what the role defines)",
        "roles/size/tasks/main.yml:5: error: `admission` has no key `objet` (did you mean "
        "`object`?) (its keys: dry_run, kind, name, namespace, object, old_object, "
        "operation, options, resource, sub_resource, uid, user_info, webhook)",
    ]


def test_a_webhook_that_never_answers_is_a_warning_at_its_entry(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": webhook_entry("quiet", "validating", "role: answering")
            + webhook_entry("label", "mutating", "role: quiet", "\n    failurePolicy: Ignore"),
            "roles/answering/tasks/main.yml": "- operator_sdk.util.admission_response: {}\n",
            "roles/quiet/tasks/main.yml": """\
- name: Work out a label
  set_fact:
    label: "{{ admission.object.metadata.name }}-x"
""",
        },
    )
    findings, _ = check_project(root)
    assert shown(findings, root) == [
        "watches.yaml:10: warning: webhook label.example.com: quiet never calls "
        "operator_sdk.util.admission_response, so it answers nothing: every request gets "
        "the failurePolicy (Ignore)"
    ]


def test_an_answer_from_a_role_the_webhook_role_includes_counts(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": webhook_entry("label", "mutating", "role: outer"),
            "roles/outer/tasks/main.yml": """\
- name: Answer through the shared role
  include_role:
    name: answer
""",
            "roles/answer/defaults/main.yml": "label: x\n",
            "roles/answer/tasks/main.yml": """\
- operator_sdk.util.admission_response:
    object: "{{ admission.object | combine({'metadata': {'labels': {'l': label}}}) }}"
""",
        },
    )
    findings, targets = check_project(root)
    assert shown(findings, root) == []
    assert {role.name for role in targets.roles} == {"outer", "answer"}


def test_webhook_roles_get_the_other_checks_too(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": webhook_entry(
                "size", "validating", "role: size", "\n    vars:\n      limit: 5"
            ),
            "roles/size/tasks/main.yml": """\
- name: Unknown module
  kubernetes.core.k8s_nope:
    name: x
- name: Answer
  operator_sdk.util.admission_response:
    allowed: true
  when: limit
""",
        },
    )
    findings, _ = check_project(root)
    lines = shown(findings, root)
    assert len(lines) == 2, lines
    assert lines[0].startswith("roles/size/tasks/main.yml:1: error: ")
    assert "kubernetes.core.k8s_nope" in lines[0]
    # The webhook's `limit: 5` is known to be a number: not a boolean in 2.19.
    assert lines[1].startswith("roles/size/tasks/main.yml:7: error: ")
    assert "number" in lines[1]


def test_a_role_a_watch_runs_too_has_its_names_unchecked(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": """\
- version: v1
  group: apps.example.com
  kind: App
  role: shared
"""
            + webhook_entry("shared", "validating", "role: shared"),
            # `size` comes from the App's spec in a reconcile: unknown here.
            "roles/shared/tasks/main.yml": """\
- operator_sdk.util.admission_response:
    allowed: "{{ size | int < 5 }}"
""",
        },
    )
    findings, _ = check_project(root)
    assert shown(findings, root) == []


def test_a_webhook_playbook_is_checked(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": webhook_entry("play", "validating", "playbook: playbooks/check.yml"),
            "playbooks/check.yml": """\
- hosts: localhost
  gather_facts: false
  collections:
    - operator_sdk.util
  tasks:
    - admission_response:
        allowed: "{{ admission.dry_run or admission.namespace == namepsace }}"
""",
        },
    )
    findings, targets = check_project(root)
    assert [path.name for path in targets.playbooks] == ["check.yml"]
    [finding] = shown(findings, root)
    assert finding.startswith(
        "playbooks/check.yml:7: error: `namepsace` is not defined in a run of webhook "
        "play.example.com (did you mean `namespace`?)"
    )


def test_names_are_not_checked_where_variables_come_from_elsewhere(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": webhook_entry("size", "validating", "role: size"),
            "roles/size/tasks/main.yml": """\
- include_vars: limits.yml
- operator_sdk.util.admission_response:
    allowed: "{{ admission.object.spec.size < from_the_file }}"
""",
            "roles/size/vars/limits.yml": "from_the_file: 5\n",
        },
    )
    findings, _ = check_project(root)
    assert shown(findings, root) == []


def test_the_admission_keys_known_to_check_are_those_a_run_gets() -> None:
    request = AdmissionRequest(
        uid="u",
        kind={"group": "", "version": "v1", "kind": "ConfigMap"},
        resource={"group": "", "version": "v1", "resource": "configmaps"},
        operation="CREATE",
        namespace="ns",
        name="n",
        obj={},
        old_object=None,
        user_info={},
        dry_run=False,
        sub_resource="",
        options=None,
    )
    hook = Webhook(
        name="a.example.com",
        type="validating",
        rules=(WebhookRule(("",), ("v1",), ("configmaps",), ("CREATE",)),),
        role=Path("roles/a"),
        playbook=None,
    )
    variables = admission_vars(request, hook).merged()
    assert set(variables["admission"]) == ADMISSION_KEYS
