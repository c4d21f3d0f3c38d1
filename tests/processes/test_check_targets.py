"""`check` on a project some of whose targets are missing: each missing one is an
error at its line of watches.yaml, and every other role and playbook is still
checked. And a module option written at a task's level is reported as
ansible-core reports it, with what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ansible_operator.commands.check import check_project

WATCHES = """\
- version: v1
  group: a.example.com
  kind: Missing
  role: example.nothere.app
- version: v1
  group: a.example.com
  kind: Typo
  role: ap
- version: v1
  group: a.example.com
  kind: App
  role: app
  finalizer:
    name: a.example.com/cleanup
    role: gone
- version: v1
  group: a.example.com
  kind: Job
  playbook: playbooks/job.yml
"""

OPTION_AT_TASK_LEVEL = """\
- name: Wait for the Deployment
  kubernetes.core.k8s_info:
    kind: Deployment
    name: app
  wait: true
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_check_goes_on_past_missing_roles(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": WATCHES,
            "requirements.yml": "collections:\n  - name: kubernetes.core\n",
            "roles/app/tasks/main.yml": "- ansible.builtin.debug:\n    msg: hi\n  when: 3\n",
            "playbooks/job.yml": "- hosts: localhost\n  tasks:\n    - ansible.builtin.debug:\n"
            "        msg: hi\n      when: 4\n",
        },
    )

    findings, targets = check_project(root)

    shown = [f.format(relative_to=root) for f in findings]
    assert [r.name for r in targets.roles] == ["app"]
    assert [p.name for p in targets.playbooks] == ["job.yml"]
    assert any(s.startswith("roles/app/tasks/main.yml:3: error: `when: 3`") for s in shown)
    assert any(s.startswith("playbooks/job.yml:5: error: `when: 4`") for s in shown)
    at = {int(s.split(":")[1]): s for s in shown if s.startswith("watches.yaml:")}
    assert sorted(at) == [4, 8, 15], shown
    assert "collection 'example.nothere' is not installed" in at[4]
    assert "requirements.yml does not list it" in at[4]
    assert "did you mean 'app'?" in at[8]
    assert "role 'gone' not found" in at[15]


def test_other_problems_of_watches_yaml_still_stop_the_check(tmp_path: Path) -> None:
    bad = WATCHES.replace("  kind: Typo\n", "  kind: Typo\n  reconcilePerid: 5s\n")
    root = write(tmp_path, {"watches.yaml": bad, "roles/app/tasks/main.yml": "[]\n"})

    findings, targets = check_project(root)

    messages = [f.format(relative_to=root) for f in findings]
    assert any("unknown key 'reconcilePerid'" in m for m in messages)
    assert any("did you mean 'app'?" in m for m in messages)
    assert targets.roles == []


def test_a_module_option_at_task_level_is_reported_as_ansible_core_does(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "watches.yaml": "- version: v1\n  group: a.example.com\n  kind: A\n  role: app\n",
            "roles/app/tasks/main.yml": OPTION_AT_TASK_LEVEL,
            "play.yml": "- hosts: localhost\n  gather_facts: false\n  roles: [app]\n",
        },
    )

    findings, _ = check_project(root)

    assert [f.format(relative_to=root) for f in findings] == [
        "roles/app/tasks/main.yml:1: error: conflicting action statements: "
        "kubernetes.core.k8s_info, wait; `wait` is an option of kubernetes.core.k8s_info "
        "written beside it, not under it: indent it under `kubernetes.core.k8s_info:` "
        "(ansible-core reads every other key of a task as a module)"
    ]
    # ansible-core itself refuses the task when it loads the role, before any task runs
    ansible_playbook = Path(sys.executable).with_name("ansible-playbook")
    done = subprocess.run(
        [str(ansible_playbook), "--syntax-check", "-i", "localhost,", "play.yml"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "conflicting action statements: kubernetes.core.k8s_info, wait" in done.stderr


def test_the_option_moved_under_its_module_checks_clean(tmp_path: Path) -> None:
    fixed = OPTION_AT_TASK_LEVEL.replace(
        "    name: app\n  wait: true", "    name: app\n    wait: true"
    )
    root = write(
        tmp_path,
        {
            "watches.yaml": "- version: v1\n  group: a.example.com\n  kind: A\n  role: app\n",
            "roles/app/tasks/main.yml": fixed,
        },
    )
    findings, _ = check_project(root)
    assert [f.format(relative_to=root) for f in findings] == []
