"""RBAC found before the cluster: `check` warns at each task that uses what
config/rbac/role.yaml does not allow, `--list-rbac` lists what the tasks use,
`--fix-rbac` adds the missing rules and keeps the rest of the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_operator.cli import main
from ansible_operator.commands.check import check_project
from ansible_operator.lint import yaml_nodes as y
from ansible_operator.lint.ansible_load import task_keywords
from ansible_operator.lint.rbac import BUILT_IN, uses_in_tasks

ADD_A_DEPLOYMENT = """
- name: Run memcached
  kubernetes.core.k8s:
    definition:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: "{{ ansible_operator_meta.name }}"
        namespace: "{{ ansible_operator_meta.namespace }}"
      spec: {}
"""


@pytest.fixture
def project(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A generated project whose role, as people grow it, now also runs a Deployment;
    checked from its directory, as `run` runs there (roles are found from there)."""
    root = tmp_path / "demo"
    assert main(["init", "--domain", "example.com", "--dir", str(root)]) == 0
    argv = ["create", "api", "--group", "cache", "--version", "v1", "--kind", "Memcached"]
    assert main([*argv, "--generate-role", "--dir", str(root)]) == 0
    tasks = root / "roles/memcached/tasks/main.yml"
    tasks.write_text(tasks.read_text() + ADD_A_DEPLOYMENT)
    capsys.readouterr()
    monkeypatch.chdir(root)
    return root


def deployment_line(root: Path) -> int:
    lines = (root / "roles/memcached/tasks/main.yml").read_text().splitlines()
    return lines.index("- name: Run memcached") + 1


def test_a_generated_project_grants_what_its_role_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "demo"
    assert main(["init", "--domain", "example.com", "--dir", str(root)]) == 0
    argv = ["create", "api", "--group", "cache", "--version", "v1", "--kind", "Memcached"]
    assert main([*argv, "--generate-role", "--dir", str(root)]) == 0
    monkeypatch.chdir(root)
    findings, _ = check_project(root)
    assert [f.format(relative_to=root) for f in findings] == []


def test_a_task_the_role_does_not_allow_is_a_warning_at_the_task(project: Path) -> None:
    findings, _ = check_project(project)

    assert [f.format(relative_to=project) for f in findings] == [
        f"roles/memcached/tasks/main.yml:{deployment_line(project)}: warning: "
        "kubernetes.core.k8s creates or changes apps/deployments, which config/rbac/role.yaml "
        "does not allow (verbs: get, create, patch, list, watch) (list and watch: the "
        "operator watches what its runs create); add a rule there (apiGroups: ['apps'], "
        "resources: [deployments], verbs: [get, create, patch, list, watch]) or run "
        "`ansible-operator check --fix-rbac` to add them"
    ]


def test_the_gap_does_not_fail_the_check(project: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["check", str(project)]) == 0
    assert "0 errors, 1 warning" in capsys.readouterr().err


def test_fix_rbac_adds_the_rule_and_keeps_the_file(
    project: Path, capsys: pytest.CaptureFixture
) -> None:
    role_file = project / "config/rbac/role.yaml"
    before = role_file.read_text()

    assert main(["check", "--fix-rbac", str(project)]) == 0

    captured = capsys.readouterr()
    assert "1 rule added to config/rbac/role.yaml" in captured.err
    assert "no problems found" in captured.err
    after = role_file.read_text()
    assert after.startswith(before)  # comments, layout and rules all kept
    rules = yaml.safe_load(after)["rules"]
    assert rules[-1] == {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["create", "get", "list", "patch", "watch"],
    }
    assert main(["check", "--fix-rbac", str(project)]) == 0
    assert "0 rules added" in capsys.readouterr().err
    assert role_file.read_text() == after


def test_list_rbac_names_each_use_and_what_cannot_be_known(
    project: Path, capsys: pytest.CaptureFixture
) -> None:
    tasks = project / "roles/memcached/tasks/main.yml"
    tasks.write_text(
        tasks.read_text()
        + "\n- name: Whatever the spec says\n  kubernetes.core.k8s:\n"
        + '    kind: "{{ wanted_kind }}"\n    name: x\n'
    )
    assert main(["check", "--list-rbac", "."]) == 0

    out = capsys.readouterr().out.splitlines()
    line = deployment_line(project)
    assert (
        f"roles/memcached/tasks/main.yml:{line}: apps/deployments: get, create, patch, list, watch"
        in out
    )
    assert any(
        entry.endswith(
            "unknown: kubernetes.core.k8s: the kind is templated (`{{ wanted_kind }}`, `v1`)"
        )
        for entry in out
    )


def uses_of(tasks: str, tmp_path: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    path = tmp_path / "tasks.yml"
    path.write_text(tasks)
    kinds = {**BUILT_IN, ("cache.example.com", "Memcached"): "memcacheds"}
    uses, _ = uses_in_tasks(path, y.compose_file(path), task_keywords(), kinds, [tmp_path])
    return [(use.group, use.resource, use.verbs) for use in uses]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        (
            "k8s: {kind: ConfigMap, name: a, state: absent}",
            [("", "configmaps", ("get", "delete"))],
        ),
        (
            "kubernetes.core.k8s: {src: cm.yaml, state: patched}",
            [("", "configmaps", ("get", "patch"))],
        ),
        (
            "k8s: {definition: {apiVersion: batch/v1, kind: Job}, force: true}",
            [("batch", "jobs", ("get", "create", "patch", "update", "list", "watch"))],
        ),
        ("k8s_info: {kind: Pod, namespace: x}", [("", "pods", ("list",))]),
        (
            "kubernetes.core.k8s_info: {api_version: apps/v1, kind: Deployment, name: a}",
            [("apps", "deployments", ("get",))],
        ),
        (
            "operator_sdk.util.k8s_status: {api_version: cache.example.com/v1, kind: Memcached,"
            " name: a, status: {}}",
            [
                ("cache.example.com", "memcacheds", ("get",)),
                ("cache.example.com", "memcacheds/status", ("patch",)),
            ],
        ),
        (
            "kubernetes.core.k8s_exec: {pod: a, command: ls}",
            [("", "pods", ("get",)), ("", "pods/exec", ("create", "get"))],
        ),
        (
            "kubernetes.core.k8s_log: {name: a}",
            [("", "pods", ("get", "list")), ("", "pods/log", ("get",))],
        ),
        (
            "kubernetes.core.k8s_scale: {kind: StatefulSet, api_version: apps/v1, replicas: 2}",
            [("apps", "statefulsets", ("get", "patch"))],
        ),
        ("ansible.builtin.debug: {msg: hi}", []),
        ("k8s: {kind: '{{ k }}', name: a}", []),
        ("k8s: {kind: Widget, api_version: example.com/v1, name: a}", []),
    ],
)
def test_what_each_module_uses(task: str, expected: list, tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    assert uses_of(f"- {task}\n", tmp_path) == expected


SECRET_TEMPLATE = """\
{% if tls_enabled | default(false) %}
apiVersion: v1
kind: Secret
{% else %}
apiVersion: v1
kind: ConfigMap
{% endif %}
metadata:
  name: {{ ansible_operator_meta.name }}-settings
  namespace: {{ ansible_operator_meta.namespace }}
"""
TEMPLATED_TASKS = """
- name: Apply the settings
  kubernetes.core.k8s:
    definition: "{{ lookup('template', 'settings.yaml.j2') | from_yaml }}"
- name: Apply what the spec names
  kubernetes.core.k8s:
    definition: "{{ lookup('template', item) | from_yaml }}"
  loop: "{{ extra_templates }}"
"""


@pytest.fixture
def templated(project: Path) -> Path:
    """The generated project whose role (as Operator SDK's users write them) also
    applies an object from its templates/, and others named by a variable."""
    (project / "roles/memcached/templates").mkdir()
    (project / "roles/memcached/templates/settings.yaml.j2").write_text(SECRET_TEMPLATE)
    tasks = project / "roles/memcached/tasks/main.yml"
    tasks.write_text(tasks.read_text() + TEMPLATED_TASKS)
    return project


def settings_line(root: Path) -> int:
    lines = (root / "roles/memcached/tasks/main.yml").read_text().splitlines()
    return lines.index("- name: Apply the settings") + 1


def test_a_definition_from_the_roles_template_is_checked_by_its_kind_lines(
    templated: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["check", "."]) == 0

    captured = capsys.readouterr()
    line = settings_line(templated)
    # The generated role.yaml allows ConfigMaps (the role's own); the Secret branch is a gap.
    assert (
        f"roles/memcached/tasks/main.yml:{line}: warning: kubernetes.core.k8s creates or "
        "changes secrets, which config/rbac/role.yaml does not allow (verbs: get, create, "
        "patch, list, watch)"
    ) in captured.out
    assert (
        "1 Kubernetes task whose kind is known only when it runs: their RBAC is not checked "
        "(`check --list-rbac` lists them)"
    ) in captured.err


def test_strict_fails_on_an_rbac_gap_and_passes_once_fixed(
    templated: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["check", "--strict", "."]) == 1
    assert f"main.yml:{settings_line(templated)}: error: " in capsys.readouterr().out

    assert main(["check", "--fix-rbac", "."]) == 0
    # The project's Deployment's rule, and the template's Secret's.
    assert "2 rules added to config/rbac/role.yaml" in capsys.readouterr().err

    assert main(["check", "--strict", "."]) == 0
    assert "no problems found" in capsys.readouterr().err


def test_list_rbac_says_why_a_lookup_by_variable_is_unknown(
    templated: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["check", "--list-rbac", "."]) == 0
    out = capsys.readouterr().out
    assert (
        "unknown: kubernetes.core.k8s: `definition` looks up a file whose name is templated"
    ) in out
