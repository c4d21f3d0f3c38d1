"""The names a role or playbook assigns itself, read from its YAML (lint/assigned_vars.py):
each way of assigning is found at its file and line, in every nesting and in every role
reached; role defaults and loop variables are not listed; what only a run can know is
counted, not guessed. Each assigning line below ends with `# expect: NAME`."""

from __future__ import annotations

import random
import re
import textwrap
from pathlib import Path

import pytest

from ansible_operator.lint import assigned_vars as av
from ansible_operator.lint.assigned_vars import AssignedVars, assigned_names, assigned_vars


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def marked(root: Path) -> dict[str, tuple[str, int]]:
    """Each `# expect: NAME` of the files under `root`: NAME's file and line."""
    found = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for name in re.findall(r"# expect: (\S+)", line):
                found[name] = (str(path.relative_to(root)), number)
    return found


def places(found: AssignedVars, root: Path) -> dict[str, tuple[str, int]]:
    return {name: (str(a.path.relative_to(root)), a.line) for name, a in found.names.items()}


def hows(found: AssignedVars) -> dict[str, str]:
    return {name: a.how for name, a in found.names.items()}


def of_role(root: Path, name: str = "app") -> AssignedVars:
    return assigned_vars(root / "roles" / name, None, root, {})


def of_playbook(root: Path, playbook: str) -> AssignedVars:
    return assigned_vars(None, root / playbook, root, {})


# -- register, set_fact and vars: at any depth ------------------------------------------------


NESTED_TASKS = """\
- name: Look the object up
  kubernetes.core.k8s_info:
    kind: ConfigMap
  register: idout  # expect: idout
- name: Decide
  block:
    - ansible.builtin.debug:
        msg: hi
      register: in_block  # expect: in_block
    - block:
        - ansible.builtin.command: "true"
          register: deeper  # expect: deeper
      rescue:
        - ansible.builtin.set_fact:
            in_rescue: 1  # expect: in_rescue
            cacheable: true
      always:
        - set_fact:
            in_always: 2  # expect: in_always
  vars:
    block_var: x  # expect: block_var
- ansible.legacy.set_fact:
    legacy: 3  # expect: legacy
- name: Tell
  ansible.builtin.debug:
    msg: "{{ task_var }}"
  vars:
    task_var: 1  # expect: task_var
- ansible.builtin.include_role:
    name: other
  vars:
    to_included: 1  # expect: to_included
"""


def test_register_set_fact_and_vars_are_found_at_every_depth(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/tasks/main.yml": NESTED_TASKS,
            "roles/app/handlers/main.yml": """\
                - name: restart
                  ansible.builtin.debug: {msg: hi}
                  register: from_handler  # expect: from_handler
                """,
            "roles/other/tasks/main.yml": "[]\n",
        },
    )

    found = of_role(root)

    assert places(found, root) == marked(root)
    assert hows(found) == {
        "idout": "register",
        "in_block": "register",
        "deeper": "register",
        "in_rescue": "set_fact",
        "in_always": "set_fact",
        "block_var": "vars of a block",
        "legacy": "set_fact",
        "task_var": "vars of a task",
        "to_included": "vars of a task",
        "from_handler": "register",
    }
    assert found.unresolved == []


def test_assigned_names_is_the_mapping_and_where_names_the_place(tmp_path: Path) -> None:
    root = write(tmp_path, {"roles/app/tasks/main.yml": NESTED_TASKS})

    names = assigned_names(root / "roles/app", None, root, {})

    assert names["idout"].where(relative_to=root) == "roles/app/tasks/main.yml:4 (register)"
    assert names["idout"].name == "idout"


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("a=1 b=2", ["a", "b"]),
        ("a=1 cacheable=yes", ["a"]),
        ("msg='x y' other=\"p q\"", ["msg", "other"]),
        ("c={{ d | default('e f') }} g=h", ["c", "g"]),
        ("c={{ f(x=1) }}", ["c"]),
        ("just words", []),
        ("a='unclosed", []),  # ansible-core refuses it too: nothing is read
        ("a={{ unclosed", []),
    ],
)
def test_set_fact_key_value_strings_are_split_as_ansible_does(
    tmp_path: Path, written: str, expected: list[str]
) -> None:
    root = write(tmp_path, {"roles/app/tasks/main.yml": f"- set_fact: {written}\n"})
    assert sorted(of_role(root).names) == expected


def test_action_keyword_forms_are_read_too(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/tasks/main.yml": """\
                - action: set_fact by_action=1  # expect: by_action
                - action:
                    module: ansible.builtin.set_fact
                    by_module: 1  # expect: by_module
                - ansible.builtin.set_fact:
                  args:
                    by_args: 1  # expect: by_args
                """,
        },
    )
    assert places(of_role(root), root) == marked(root)


def test_a_templated_set_fact_name_is_counted_not_listed(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/tasks/main.yml": """\
                - ansible.builtin.set_fact:
                    "{{ item }}_seen": true
                  loop: [a, b]
                - set_fact: "{{ other }}=1"
                """,
        },
    )

    found = of_role(root)

    assert found.names == {}
    assert [(u.line, u.what) for u in found.unresolved] == [
        (2, "set_fact of a templated name `{{ item }}_seen`"),
        (4, "set_fact of a templated name `{{ other }}`"),
    ]


# -- include_vars -------------------------------------------------------------------------


def test_include_vars_name_file_and_dir_forms(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/tasks/main.yml": """\
                - ansible.builtin.include_vars:
                    file: extra.yml
                    name: bundle  # expect: bundle
                - include_vars: extra.yml
                - ansible.legacy.include_vars:
                    file: vars/prefixed.yml
                - include_vars: file=beside.yml
                - ansible.builtin.include_vars:
                    dir: more
                """,
            "roles/app/tasks/beside.yml": "from_beside: 1  # expect: from_beside\n",
            "roles/app/vars/extra.yml": "---\nfrom_extra: 1  # expect: from_extra\n",
            "roles/app/vars/prefixed.yml": "from_prefixed: 1  # expect: from_prefixed\n",
            "roles/app/vars/more/a.yml": "from_dir_a: 1  # expect: from_dir_a\n",
            "roles/app/vars/more/deep/b.json": '{"from_dir_b": 1}  # expect: from_dir_b\n',
            "roles/app/vars/more/notes.txt": "not_vars: 1\n",
        },
    )
    # JSON has no comments: mark its line by hand
    (root / "roles/app/vars/more/deep/b.json").write_text('{"from_dir_b": 1}\n')

    found = of_role(root)

    expected = marked(root)
    expected["from_dir_b"] = ("roles/app/vars/more/deep/b.json", 1)
    assert places(found, root) == expected
    assert hows(found) == {
        "bundle": "include_vars name",
        "from_extra": "include_vars file",
        "from_prefixed": "include_vars file",
        "from_beside": "include_vars file",
        "from_dir_a": "include_vars dir",
        "from_dir_b": "include_vars dir",
    }
    assert found.unresolved == []


def test_include_vars_of_a_playbook_looks_beside_it(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "play.yml": """\
                - hosts: localhost
                  tasks:
                    - include_vars: settings.yml
                    - include_vars:
                        dir: conf
                """,
            "vars/settings.yml": "from_vars_folder: 1  # expect: from_vars_folder\n",
            "conf/one.yaml": "from_conf: 1  # expect: from_conf\n",
        },
    )
    assert places(of_playbook(root, "play.yml"), root) == marked(root)


def test_include_vars_that_only_a_run_can_resolve_is_counted(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/tasks/main.yml": """\
                - include_vars: "{{ ansible_os_family }}.yml"
                - include_vars:
                    name: "{{ which }}"
                - include_vars:
                    dir: "{{ where }}"
                - include_vars: missing.yml
                - include_vars: broken.yml
                - include_vars: sealed.yml
                - include_vars: fine.yml
                """,
            "roles/app/vars/broken.yml": "a: [\n",
            "roles/app/vars/sealed.yml": "$ANSIBLE_VAULT;1.1;AES256\n6136623...\n",
            "roles/app/vars/fine.yml": "fine: 1  # expect: fine\n",
        },
    )

    found = of_role(root)

    assert places(found, root) == marked(root)
    assert [(u.line, u.what) for u in found.unresolved] == [
        (1, "include_vars of a templated file `{{ ansible_os_family }}.yml`"),
        (3, "include_vars name of a templated name `{{ which }}`"),
        (5, "include_vars of a templated dir `{{ where }}`"),
        (6, "include_vars file `missing.yml` not found"),
        (7, "include_vars file `broken.yml` cannot be read as YAML"),
        (8, "include_vars file `sealed.yml` is not a mapping (encrypted?)"),
    ]


# -- the role's own vars, and what is not listed ----------------------------------------------


def test_defaults_role_vars_and_loop_variables_are_not_listed(tmp_path: Path) -> None:
    # Defaults and a role's vars/ are what a spec key is meant to override; the loop
    # wins over an extra var. Only what the role assigns as it runs is refused.
    root = write(
        tmp_path,
        {
            "roles/app/defaults/main.yml": "size: 1\nmode: fast\n",
            "roles/app/vars/main.yml": "internal: 1\n",
            "roles/app/tasks/main.yml": """\
                - ansible.builtin.debug:
                    msg: "{{ item }} {{ entry }} {{ position }}"
                  loop: [1, 2]
                  loop_control:
                    loop_var: entry
                    index_var: position
                - ansible.builtin.debug:
                    msg: "{{ item }}"
                  with_items: [1]
                """,
        },
    )

    found = of_role(root)

    assert places(found, root) == marked(root) == {}


# -- other roles ------------------------------------------------------------------------------


def test_roles_the_role_reaches_are_read_too(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/meta/main.yml": """\
                dependencies:
                  - common
                  - role: tuned
                    vars:
                      dependency_var: 1
                    dependency_param: 2
                    when: true
                """,
            "roles/app/tasks/main.yml": """\
                - ansible.builtin.import_role:
                    name: imported
                - ansible.builtin.include_role:
                    name: included
                    vars_from: extra
                """,
            "roles/common/tasks/main.yml": "- set_fact: {from_common: 1}  # expect: from_common\n",
            "roles/tuned/tasks/main.yml": "[]\n",
            "roles/imported/tasks/main.yml": """\
                - ansible.builtin.debug: {msg: hi}
                  register: from_imported  # expect: from_imported
                """,
            "roles/included/vars/main.yml": "from_included_vars: 1\n",
            "roles/included/vars/extra.yml": "from_vars_from: 1\n",
            "roles/included/defaults/main.yml": "not_listed: 1\n",
            "roles/included/tasks/main.yml": "[]\n",
            "roles/unrelated/tasks/main.yml": "- set_fact: {unrelated: 1}\n",
        },
    )

    found = of_role(root)

    # The roles it reaches are read; their vars, parameters and vars_from are defaults.
    assert places(found, root) == marked(root)


def test_the_first_assignment_is_the_one_kept(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/vars/main.yml": "status: {}\n",
            "roles/app/tasks/main.yml": "- set_fact: {status: 1}\n- set_fact: {status: 2}\n",
            "roles/app/tasks/a.yml": "- set_fact: {status: 3}\n",
        },
    )
    assert of_role(root).names["status"].where(root) == "roles/app/tasks/main.yml:1 (set_fact)"


# -- playbooks --------------------------------------------------------------------------------


def test_a_playbook_its_plays_imports_and_roles(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "playbooks/job.yml": """\
                - ansible.builtin.import_playbook: first.yml
                  vars:
                    import_var: 1
                - hosts: localhost
                  vars:
                    play_var: 1
                  vars_files:
                    - files/one.yml
                    - [files/missing.yml, files/two.yml]
                    - "files/{{ env_name }}.yml"
                  vars_prompt:
                    - name: prompted
                      prompt: what?
                  roles:
                    - role: app
                      vars:
                        role_var: 1
                      role_param: 2
                      tags: [x]
                  pre_tasks:
                    - set_fact: {early: 1}  # expect: early
                  tasks:
                    - ansible.builtin.include_tasks: tasks/more.yml
                  post_tasks:
                    - debug: {msg: hi}
                      register: late  # expect: late
                  handlers:
                    - debug: {msg: hi}
                      register: handled  # expect: handled
                """,
            "playbooks/first.yml": """\
                - hosts: localhost
                  tasks:
                    - set_fact: {in_first: 1}  # expect: in_first
                """,
            "playbooks/tasks/more.yml": """\
                - set_fact: {included: 1}  # expect: included
                - include_role: {name: helper}
                """,
            "playbooks/files/one.yml": "from_one: 1\n",
            "playbooks/files/two.yml": "from_two: 1\n",
            "playbooks/group_vars/all.yml": "grouped: 1\n",
            "playbooks/roles/app/tasks/main.yml": """\
                - debug: {msg: hi}
                  register: in_app  # expect: in_app
                """,
            "roles/helper/tasks/main.yml": """\
                - debug: {msg: hi}
                  register: in_helper  # expect: in_helper
                """,
        },
    )

    found = of_playbook(root, "playbooks/job.yml")

    # What its tasks, imports and roles assign; a play's vars, vars_files, vars_prompt,
    # its roles' vars and parameters and group_vars are its defaults: not listed.
    assert places(found, root) == marked(root)
    assert found.unresolved == []


def test_a_playbook_wins_over_a_role(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/tasks/main.yml": "- set_fact: {of_role: 1}\n",
            "play.yml": "- hosts: localhost\n  tasks:\n    - set_fact: {of_play: 1}\n",
        },
    )
    found = assigned_vars(root / "roles/app", root / "play.yml", root, {})
    assert sorted(found.names) == ["of_play"]


def test_task_includes_only_a_run_can_resolve_are_counted_outside_roles(
    tmp_path: Path,
) -> None:
    root = write(
        tmp_path,
        {
            "play.yml": """\
                - hosts: localhost
                  tasks:
                    - include_tasks: "{{ phase }}.yml"
                    - import_playbook: "{{ other }}.yml"
                """,
            # in a role every task file is read anyway: nothing to count
            "roles/app/tasks/main.yml": '- include_tasks: "{{ phase }}.yml"\n',
            "roles/app/tasks/install.yml": "- set_fact: {installed: 1}\n",
        },
    )
    assert [u.what for u in of_playbook(root, "play.yml").unresolved] == [
        "include_tasks of a templated file `{{ phase }}.yml`",
    ]
    role = of_role(root)
    assert (sorted(role.names), role.unresolved) == (["installed"], [])


# -- files that are not YAML ------------------------------------------------------------------


def test_a_file_that_is_not_yaml_is_skipped_and_the_rest_still_read(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "roles/app/tasks/main.yml": '- name: x\n  debug:\n    msg: "oops\n',
            "roles/app/tasks/other.yml": "- set_fact: {still: 1}  # expect: still\n",
            "roles/app/vars/main.yml": "a: [\n",
            "roles/app/meta/main.yml": "dependencies: {\n",
            "roles/app/vars/extra.yml": "",
        },
    )
    (root / "roles/app/vars/extra.yml").write_bytes(b"\xff\xfe\x00 not utf-8")
    (root / "roles/app/tasks/other.yml").write_text(
        "- set_fact: {still: 1}  # expect: still\n- include_vars: extra.yml\n"
    )

    found = of_role(root)

    assert places(found, root) == marked(root)
    assert [(u.path.name, u.what) for u in found.unresolved] == [
        ("other.yml", "include_vars file `extra.yml` cannot be read as YAML"),
    ]


# -- a property: every assignment of a random task tree is found --------------------------------


def random_tasks(
    rng: random.Random, depth: int, indent: int, lines: list[str], expected: dict[str, tuple]
) -> None:
    """Tasks of random kinds and nesting; each assigns a fresh name, noted in `expected`
    with its line and how."""
    pad = " " * indent
    for _ in range(rng.randint(1, 3)):
        name = f"v{len(expected)}"
        kind = rng.choice(["register", "set_fact", "vars", "block", "plain"] if depth < 5 else
                          ["register", "set_fact", "vars", "plain"])  # fmt: skip
        if kind == "block":
            lines.append(f"{pad}- block:")
            random_tasks(rng, depth + 1, indent + 4, lines, expected)
            for section in ("rescue", "always"):
                if rng.random() < 0.5:
                    lines.append(f"{pad}  {section}:")
                    random_tasks(rng, depth + 1, indent + 4, lines, expected)
            if rng.random() < 0.5:
                name = f"v{len(expected)}"  # the nested tasks took the names before
                lines.append(f"{pad}  vars:")
                lines.append(f"{pad}    {name}: 1")
                expected[name] = (len(lines), "vars of a block")
            continue
        module = rng.choice(["debug", "ansible.builtin.debug", "ansible.legacy.debug"])
        if kind == "set_fact":
            module = rng.choice(sorted(av._SET_FACT))
            lines.append(f"{pad}- {module}:")
            lines.append(f"{pad}    {name}: 1")
            expected[name] = (len(lines), "set_fact")
        else:
            lines.append(f"{pad}- {module}: {{msg: hi}}")
        if kind == "register":
            lines.append(f"{pad}  register: {name}")
            expected[name] = (len(lines), "register")
        elif kind == "vars":
            lines.append(f"{pad}  vars:")
            lines.append(f"{pad}    {name}: 1")
            expected[name] = (len(lines), "vars of a task")
        if rng.random() < 0.3:
            lines.append(f"{pad}  loop: [1, 2]")
            lines.append(f"{pad}  loop_control: {{loop_var: loop_{name}}}")


@pytest.mark.parametrize("seed", range(60))
def test_every_assignment_of_a_random_task_tree_is_found_at_its_line(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    expected: dict[str, tuple] = {}
    files = {}
    for file in ("tasks/main.yml", "tasks/more.yml", "handlers/main.yml"):
        lines: list[str] = []
        before = set(expected)
        random_tasks(rng, 0, 0, lines, expected)
        files[f"roles/app/{file}"] = "\n".join(lines) + "\n"
        for name in set(expected) - before:
            expected[name] = (f"roles/app/{file}", *expected[name])
    root = write(tmp_path, files)

    found = of_role(root)

    got = {name: (str(a.path.relative_to(root)), a.line, a.how) for name, a in found.names.items()}
    assert got == expected, files
