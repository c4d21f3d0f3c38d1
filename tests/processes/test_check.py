"""`ansible-operator check`: each problem of a small project is reported at its
file and line, the fixed forms of the same tasks are not, and the repository's
own samples and a freshly generated project check clean. No cluster involved;
roles and playbooks are loaded with the installed ansible-core."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_operator.cli import main
from ansible_operator.commands.check import check_project
from ansible_operator.lint.findings import Finding, Severity
from ansible_operator.lint.jinja_types import (
    BOOL,
    LIST,
    NUMBER,
    STRING,
    UNKNOWN,
    Scope,
    infer,
    parse_expression,
)

REPO = Path(__file__).resolve().parents[2]

# Each problem's line ends with `# expect: NAME`; EXPECTED says what is reported there
# (Ansible names a task by its first line).
PROBLEM_FILES = {
    "watches.yaml": """\
- version: v1
  group: apps.example.com
  kind: App
  role: app
- version: v1
  group: apps.example.com
  kind: Job
  playbook: playbooks/job.yml
""",
    "roles/app/meta/main.yml": """\
collections:
  - kubernetes.core
  - operator_sdk.util
""",
    "roles/app/defaults/main.yml": """\
size: 1
mode: fast
enabled: true
items_text: "[{{ size }}, {{ size + 1 }}]"  # expect: text-list
""",
    "roles/app/tasks/broken.yml": """\
- name: Unterminated
  debug:
    msg: "oops  # expect: yaml
- name: More
  debug: {}
""",
    "roles/app/tasks/main.yml": """\
---
- name: Look up what exists
  k8s_info:
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
  register: existing

- name: Keep the ConfigMap
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: app
        namespace: "{{ ansible_operator_meta.namespace }}"
        labels:
          replicas: "{{ size | int }}"  # expect: label
          tier: 3  # expect: literal
      data:
        next: "{{ (size | int) + 1 }}"  # expect: data
        size: "{{ size | string }}"
        "{{ mode }}": "yes"  # expect: key
  when: existing.resources  # expect: when-list

- name: Unknown module  # expect: unknown-fqcn
  kubernetes.core.k8s_nope:
    name: x

- name: Unknown short name  # expect: unknown-short
  k8s_statuss:
    status: {}

- name: Status
  k8s_status:
    api_version: apps.example.com/v1
    kind: App
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      mode: "{% if enabled %}on{% endif %}"  # expect: none
  when: mode  # expect: when-string
  changed_when: size == {{ size }}  # expect: when-braces
  failed_when: "{{ enabled }}"  # expect: when-wrapped

- name: Pass items on
  debug:
    msg: "{{ item.note }}"
  loop:
    - note: "{{ omit }}"  # expect: omit-loop

- name: Assertions
  assert:
    that:
      - size is defined and 'size | length > 0'  # expect: assert-string
      - existing.resources | length == 0

- name: Wait
  async_status:
    jid: "{{ job.ansible_job_id }}"
  register: job
  until: job.finished  # expect: until
  failed_when:
    - job.msg == "state: failed"  # expect: mapping

- name: Templates inside strings
  debug:
    msg: "{{ lookup('pipe', 'echo {{ size }}') }}"  # expect: lookup-embedded
  when: mode == '{{ mode }}'  # expect: when-embedded
""",
    "playbooks/job.yml": """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Make a pod
      kubernetes.core.k8s:
        definition:
          apiVersion: v1
          kind: Pod
          metadata:
            name: job
          spec:
            containers:
              - name: main
                image: busybox
                args: ["--count", "{{ 2 * 3 }}"]  # expect: args
                env:
                  - name: DEBUG
                    value: true  # expect: env
      when: ansible_operator_meta.name | length  # expect: when-number
""",
}

ERROR, WARNING = Severity.ERROR, Severity.WARNING
EXPECTED = {
    "text-list": (WARNING, "2.18 read the rendered text as a list, 2.19+ keeps it a string"),
    "yaml": (ERROR, "YAML parsing failed"),
    "label": (ERROR, "ConfigMap labels.replicas: `{{ size | int }}` gives a number in "
                     "ansible-core 2.19+"),
    "literal": (ERROR, "ConfigMap labels.tier is a number (3)"),
    "data": (ERROR, "ConfigMap data.next: `{{ (size | int) + 1 }}` gives a number in "
                    "ansible-core 2.19+ (2.18 rendered it as a string), which the API server "
                    "rejects here; add `| string`: `{{ ((size | int) + 1) | string }}`"),
    "key": (ERROR, "the key `{{ mode }}` is not templated"),
    "when-list": (ERROR, "`when: existing.resources` does not give a boolean "
                         "(`existing.resources` is a list"),
    "unknown-fqcn": (ERROR, "couldn't resolve module/action 'kubernetes.core.k8s_nope'"),
    "unknown-short": (ERROR, "couldn't resolve module/action 'k8s_statuss'"),
    "none": (WARNING, "ansible-core 2.19+ gives None there (2.18 gave '')"),
    "when-string": (ERROR, "`when: mode` does not give a boolean (variable `mode` is a string)"),
    "when-braces": (ERROR, "`changed_when` has `{{ }}` inside the expression"),
    "when-wrapped": (WARNING, "`failed_when` is wrapped in `{{ }}`: deprecated"),
    "omit-loop": (ERROR, "loop item key `note` is `omit`: ansible-core 2.19+ drops it from the "
                         "item, so `item.note` (line 47) is undefined"),
    "assert-string": (ERROR, "may not give a boolean ('size | length > 0' is a string)"),
    "until": (ERROR, "`until: job.finished` does not give a boolean (`job.finished` is a "
                     "number, 0 or 1: test it with `is finished`)"),
    "mapping": (ERROR, "`failed_when` is a mapping, not an expression"),
    "lookup-embedded": (WARNING, "a template inside a lookup's argument: deprecated"),
    "when-embedded": (WARNING, "`when` has a template inside a string: deprecated"),
    "args": (ERROR, "Pod container args entry: `{{ 2 * 3 }}` gives a number"),
    "env": (ERROR, "Pod env DEBUG is a boolean (true)"),
    "when-number": (ERROR, "`ansible_operator_meta.name | length` is a number"),
}  # fmt: skip

# The same tasks, written the way ansible-core 2.19 wants: nothing to report.
FIXED_FILES = {
    "watches.yaml": PROBLEM_FILES["watches.yaml"],
    "roles/app/meta/main.yml": PROBLEM_FILES["roles/app/meta/main.yml"],
    "roles/app/defaults/main.yml": """\
size: 1
mode: fast
enabled: true
items_text: "{{ [size, size + 1] }}"
""",
    "roles/app/tasks/main.yml": """\
---
- name: Look up what exists
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
  register: existing

- name: Keep the ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: app
        namespace: "{{ ansible_operator_meta.namespace }}"
        labels:
          replicas: "{{ size | int | string }}"
          tier: "3"
      data: "{{ {'next': ((size | int) + 1) | string, 'size': size | string, mode: 'yes'} }}"
  when: existing.resources | length > 0

- name: Status
  operator_sdk.util.k8s_status:
    api_version: apps.example.com/v1
    kind: App
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      mode: "{% if enabled %}on{% else %}{{ '' }}{% endif %}"
  when: mode | length > 0
  changed_when: size == wanted | default(size)
  failed_when: enabled

- name: Pass items on
  ansible.builtin.debug:
    msg: "{{ item.note | default(omit) }}"
  loop:
    - note: "{{ omit }}"

- name: Assertions
  ansible.builtin.assert:
    that:
      - size is defined and size | string | length > 0
      - not existing.resources
      - 'existing.msg | default("") != "state: failed"'

- name: Wait
  ansible.builtin.async_status:
    jid: "{{ job.ansible_job_id }}"
  register: job
  until: job is finished
  failed_when: job.rc | default(0) != 0 or job.stdout is search("failed")

- name: Templates inside strings
  ansible.builtin.debug:
    msg: "{{ lookup('pipe', 'echo ' ~ size) }}"
  when: mode == 'fast'
""",
    "playbooks/job.yml": """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Make a pod
      kubernetes.core.k8s:
        definition:
          apiVersion: v1
          kind: Pod
          metadata:
            name: job
          spec:
            containers:
              - name: main
                image: busybox
                args: ["--count", "{{ (2 * 3) | string }}"]
                env:
                  - name: DEBUG
                    value: "true"
      when: ansible_operator_meta.name | length > 0
""",
}


def write_project(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def marked_lines(root: Path) -> dict[str, tuple[Path, int]]:
    found = {}
    for relative in PROBLEM_FILES:
        path = root / relative
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            match = re.search(r"# expect: (\S+)", line)
            if match:
                found[match[1]] = (path, number)
    return found


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Finding]]:
    root = write_project(tmp_path_factory.mktemp("problems"), PROBLEM_FILES)
    findings, targets = check_project(root)
    assert [p.name for p in targets.playbooks] == ["job.yml"]
    return root, findings


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_problem_is_reported_at_its_line(
    problems: tuple[Path, list[Finding]], name: str
) -> None:
    root, findings = problems
    path, line = marked_lines(root)[name]
    severity, message = EXPECTED[name]
    here = [f for f in findings if Path(f.path) == path and f.line == line]
    assert any(f.severity is severity and message in f.message for f in here), (
        f"{path.relative_to(root)}:{line}: nothing like {message!r}; found there: "
        f"{[f.format() for f in here]}"
    )


def test_nothing_is_reported_that_is_not_marked(problems: tuple[Path, list[Finding]]) -> None:
    root, findings = problems
    marked = set(marked_lines(root).values())
    assert [f.format() for f in findings if (Path(f.path), f.line) not in marked] == []


def test_messages_do_not_repeat_the_place_or_quote_the_source(
    problems: tuple[Path, list[Finding]],
) -> None:
    # ansible-core 2.18 appends "The error appears to be in '...': line N ... The
    # offending line appears to be: ..." to every message; a finding starts with its
    # file and line already, and one line per finding is what editors and CI parse.
    _, findings = problems
    noisy = [f.format() for f in findings if "appears to be" in f.message or "\n" in f.message]
    assert noisy == []


def test_the_fixed_forms_check_clean(tmp_path: Path) -> None:
    root = write_project(tmp_path, FIXED_FILES)
    findings, _ = check_project(root)
    assert [f.format(relative_to=root) for f in findings] == []


def test_the_repository_samples_check_clean() -> None:
    findings, targets = check_project(REPO)
    assert [f.format(relative_to=REPO) for f in findings] == []
    assert {"memcached", "harborcluster", "capi_samplecluster"} <= {r.name for r in targets.roles}


def test_a_generated_project_checks_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "demo-operator"
    assert main(["init", "--domain", "example.com", "--dir", str(project)]) == 0
    for kind, how in (("Memcached", "role"), ("Backup", "playbook")):
        argv = ["create", "api", "--group", "cache", "--version", "v1", "--kind", kind]
        assert main([*argv, f"--generate-{how}", "--dir", str(project)]) == 0
    # and a second version of one, converted by the fieldMap scaffolded for it
    argv = ["create", "api", "--group", "cache", "--version", "v2", "--kind", "Memcached"]
    assert main([*argv, "--generate-role", "--dir", str(project)]) == 0
    capsys.readouterr()
    # from the project, as `run` runs: a role named like one elsewhere is its own
    monkeypatch.chdir(project)

    assert main(["check", str(project)]) == 0

    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no problems found in 1 role, 1 playbook" in captured.err


def test_the_exit_code_says_whether_something_will_fail(
    problems: tuple[Path, list[Finding]], capsys: pytest.CaptureFixture
) -> None:
    root, _ = problems
    assert main(["check", str(root)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"roles/app/tasks/main\.yml:20: error: ConfigMap data\.next", out)


def test_only_warnings_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    files = {
        "watches.yaml": PROBLEM_FILES["watches.yaml"].split("- version: v1\n  group")[0]
        + "- version: v1\n  group: a.example.com\n  kind: A\n  role: a\n",
        "roles/a/tasks/main.yml": "- ansible.builtin.debug:\n    msg: ok\n  when: '{{ true }}'\n",
    }
    root = write_project(tmp_path, files)
    assert main(["check", str(root)]) == 0
    assert "main.yml:3: warning: `when` is wrapped in `{{ }}`" in capsys.readouterr().out


def test_a_bad_watches_file_is_reported_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "roles/a/tasks").mkdir(parents=True)
    (tmp_path / "roles/a/tasks/main.yml").write_text("[]\n")
    (tmp_path / "watches.yaml").write_text(
        "- version: v1\n  group: a.example.com\n  kind: A\n  role: a\n  reconcilePerid: 5s\n"
    )
    assert main(["check", str(tmp_path)]) == 1
    assert "watches.yaml:5: error: unknown key 'reconcilePerid'" in capsys.readouterr().out


# -- what an expression yields ----------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "types"),
    [
        ("x | length > 0", {BOOL}),
        ("x is defined and y is not none", {BOOL}),
        ("not result.resources", {BOOL}),
        ("x | bool", {BOOL}),
        ("x.startswith('a')", {BOOL}),
        ("x | length", {NUMBER}),
        ("(x | int) + 1", {NUMBER}),
        ("x | int + 1", {NUMBER}),
        ("x * 2 - 1", {NUMBER}),
        ("'a' ~ x", {STRING}),
        ("x | to_json", {STRING}),
        ("lookup('file', 'a.json')", {STRING}),
        ("result.resources", {LIST}),
        ("result.rc", {NUMBER}),
        ("x | map('string') | list", {LIST}),
        ("query('k8s', kind='Pod')", {LIST}),
        ("x | default('')", {UNKNOWN, STRING}),
        ("x | default(false)", {UNKNOWN, BOOL}),
        ("x", {UNKNOWN}),
        ("other.resources", {UNKNOWN}),  # not a registered result: could be anything
        ("x if y else 3", {UNKNOWN, NUMBER}),
        ("x is defined and 'x | length > 0'", {BOOL, STRING}),
    ],
)
def test_what_an_expression_yields(expression: str, types: set[str]) -> None:
    scope = Scope(registered=frozenset({"result"}))
    assert infer(parse_expression(expression), scope).types == types


def test_a_trailing_comma_is_a_syntax_error_as_in_ansible() -> None:
    with pytest.raises(Exception, match="chunk after expression"):
        parse_expression("1 == 2,")


# -- the spec keys the operator refuses ---------------------------------------------------------

SHADOWING_FILES = {
    "watches.yaml": """\
- version: v1
  group: apps.example.com
  kind: App
  role: app
- version: v1
  group: apps.example.com
  kind: Job
  playbook: playbooks/job.yml
""",
    "roles/app/tasks/main.yml": """\
- name: Look up the object's ID
  kubernetes.core.k8s_info:
    kind: ConfigMap
    name: id
  register: idout
- name: Decide
  ansible.builtin.set_fact:
    ready: "{{ idout.resources | length > 0 }}"
- name: Per platform
  ansible.builtin.include_vars: "{{ platform }}.yml"
""",
    "roles/app/defaults/main.yml": "platform: linux\n",
    "playbooks/job.yml": """\
- hosts: localhost
  gather_facts: false
  vars:
    attempts: 3
  tasks:
    - ansible.builtin.command: "true"
      register: outcome
    - ansible.builtin.debug:
        msg: "{{ attempts }} {{ outcome.rc }}"
""",
}


def test_check_lists_the_spec_keys_a_role_assigns_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_project(tmp_path, SHADOWING_FILES)
    monkeypatch.chdir(root)

    # informational: nothing fails and stdout (the findings tools parse) stays empty
    assert main(["check", str(root)]) == 0

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "spec keys that would shadow a role's own variables (refused by the operator):",
        "  Job (playbooks/job.yml):",
        "    outcome  playbooks/job.yml:7 (register)",  # not `attempts`: a play's default
        "  App (roles/app):",
        "    idout  roles/app/tasks/main.yml:5 (register)",
        "    ready  roles/app/tasks/main.yml:8 (set_fact)",
        "    and names known only when it runs (not refused):",
        "      roles/app/tasks/main.yml:10 (include_vars of a templated file `{{ platform }}.yml`)",
        "ansible-operator check: no problems found in 1 role, 1 playbook",
    ]


def test_nothing_is_listed_when_no_role_assigns_a_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "watches.yaml": SHADOWING_FILES["watches.yaml"].split("- version: v1\n  group: apps."
                                                              "example.com\n  kind: Job")[0],
        "roles/app/tasks/main.yml": "- ansible.builtin.debug:\n    msg: hi\n",
    }  # fmt: skip
    root = write_project(tmp_path, files)
    monkeypatch.chdir(root)

    assert main(["check", str(root)]) == 0

    assert capsys.readouterr().err.splitlines() == [
        "ansible-operator check: no problems found in 1 role, 0 playbooks"
    ]


def test_spec_may_override_and_a_finalizer_own_role_show_in_the_listing(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "watches.yaml": """\
- version: v1
  group: apps.example.com
  kind: App
  role: app
  specMayOverride: [ready]
  finalizer:
    name: apps.example.com/cleanup
    role: cleanup
- version: v1
  group: apps.example.com
  kind: Copy
  role: app
  specMayOverride: [ready]
""",
        "roles/app/tasks/main.yml": SHADOWING_FILES["roles/app/tasks/main.yml"].split(
            "- name: Per platform"
        )[0],
        "roles/cleanup/tasks/main.yml": "- ansible.builtin.set_fact:\n    gone: true\n",
    }
    root = write_project(tmp_path, files)
    monkeypatch.chdir(root)

    assert main(["check", str(root)]) == 0

    assert capsys.readouterr().err.splitlines()[:-1] == [
        "spec keys that would shadow a role's own variables (refused by the operator):",
        "  App, Copy (roles/app):",
        "    idout  roles/app/tasks/main.yml:5 (register)",
        "    may be set (specMayOverride): ready",
        "  App, when deleted (roles/cleanup):",
        "    gone  roles/cleanup/tasks/main.yml:2 (set_fact)",
    ]


def test_role_entry_keywords_are_ansible_cores() -> None:
    # Any other key of a `roles:` or `dependencies:` entry is a role parameter, a
    # variable the spec could forge; lint/assigned_vars.py keeps its own copy of the
    # list (it reads YAML only): an ansible-core that adds a keyword must show here.
    from ansible.playbook.role.include import RoleInclude

    from ansible_operator.lint import assigned_vars

    assert frozenset(RoleInclude.fattributes) == assigned_vars._ROLE_KEYWORDS
