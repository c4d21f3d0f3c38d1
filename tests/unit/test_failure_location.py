"""Failures say where: a failed run names its task and file:line; a role that
cannot be found says where it was looked for, what was meant and how to
install a missing collection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_operator.project.watches import WatchesError, load_watches
from ansible_operator.runner.events import (
    CUT_MARK,
    MAX_FAILURE_MESSAGE,
    NO_LOG_MESSAGE,
    RunSummary,
    short_location,
)
from ansible_operator.runner.output_errors import located_error

PROJECT = Path("/opt/ansible")
TASKS = PROJECT / "roles" / "greeting" / "tasks" / "main.yml"


def failed(kind: str = "runner_on_failed", **data: Any) -> dict[str, Any]:
    return {
        "event": kind,
        "event_data": {"task": "Write the ConfigMap", "host": "localhost"} | data,
    }


def stats(failures: int = 0, unreachable: int = 0) -> dict[str, Any]:
    return {
        "event": "playbook_on_stats",
        "event_data": {
            "ok": {"localhost": 1},
            "failures": {"localhost": failures} if failures else {},
            "dark": {"localhost": unreachable} if unreachable else {},
        },
    }


def failure_message(*events: dict[str, Any]) -> str:
    summary = RunSummary()
    for event in events:
        summary.add(event)
    return summary.failure_message


@pytest.fixture
def in_project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The operator's working directory is the project, as in its image."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            {"task_path": "{project}/roles/greeting/tasks/main.yml:12", "res": {"msg": "boom"}},
            'task "Write the ConfigMap" (roles/greeting/tasks/main.yml:12) failed: boom',
            id="under-the-project-is-relative",
        ),
        pytest.param(
            {"task_path": "/usr/share/roles/x/tasks/main.yml:3", "res": {"msg": "boom"}},
            'task "Write the ConfigMap" (/usr/share/roles/x/tasks/main.yml:3) failed: boom',
            id="elsewhere-stays-absolute",
        ),
        pytest.param(
            {"task_path": "{project}/playbooks/site.yml:7", "res": {"stderr": "exit 3"}},
            'task "Write the ConfigMap" (playbooks/site.yml:7) failed: exit 3',
            id="stderr-when-no-msg",
        ),
        pytest.param(
            {"task_path": "{project}/site.yml:7", "res": {}},
            'task "Write the ConfigMap" (site.yml:7) failed',
            id="no-message-at-all",
        ),
        pytest.param(
            {"task_path": "{project}/site.yml:7", "res": {"censored": NO_LOG_MESSAGE}},
            f'task "Write the ConfigMap" (site.yml:7) failed: {NO_LOG_MESSAGE}',
            id="no-log",
        ),
        pytest.param(
            {
                "task_path": "{project}/site.yml:9",
                "res": {"results": [{"failed": True, "msg": "item 2 is bad"}, {"msg": "fine"}]},
            },
            'task "Write the ConfigMap" (site.yml:9) failed: item 2 is bad',
            id="loop-item",
        ),
        pytest.param(
            {"res": {"msg": "package memcached not found"}},
            "package memcached not found",
            id="no-task-path-is-the-bare-message",
        ),
    ],
)
def test_a_failed_task_is_named_with_its_file_and_line(
    in_project: Path, data: dict[str, Any], expected: str
) -> None:
    if "task_path" in data:
        data = data | {"task_path": data["task_path"].format(project=in_project)}
    assert failure_message(failed(**data), stats(failures=1)) == expected


def test_an_unreachable_host_is_said_so(in_project: Path) -> None:
    message = failure_message(
        failed(
            "runner_on_unreachable",
            task_path=f"{in_project}/site.yml:4",
            res={"msg": "ssh: connect refused"},
        ),
        stats(unreachable=1),
    )
    assert (
        message
        == 'task "Write the ConfigMap" (site.yml:4) could not reach localhost: ssh: connect refused'
    )


def test_a_secret_in_the_message_stays_redacted_beside_the_location(in_project: Path) -> None:
    summary = RunSummary()
    summary.redactor.add("hunter2-password")
    summary.add(failed(task_path=f"{in_project}/site.yml:4", res={"msg": "bad hunter2-password"}))
    assert "hunter2" not in summary.failure_message
    assert summary.failure_message.startswith(
        'task "Write the ConfigMap" (site.yml:4) failed: bad '
    )


def test_a_huge_message_is_cut_after_redaction_and_keeps_the_location(in_project: Path) -> None:
    secret = "s3cr3t-value-long"
    # The secret straddles the cut: cut first, its head would escape redaction.
    head = "x" * (MAX_FAILURE_MESSAGE - 60)
    summary = RunSummary()
    summary.redactor.add(secret)
    summary.add(
        failed(task_path=f"{in_project}/site.yml:4", res={"msg": head + secret + "y" * 9000})
    )
    message = summary.failure_message
    assert len(message) == MAX_FAILURE_MESSAGE
    assert message.startswith('task "Write the ConfigMap" (site.yml:4) failed: xxx')
    assert message.endswith(CUT_MARK)
    assert "s3cr" not in message


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        (f"{TASKS}:12", "roles/greeting/tasks/main.yml:12"),
        (f"{PROJECT}/site.yml:9:1", "site.yml:9:1"),
        (f"{PROJECT}/site.yml", "site.yml"),
        ("/elsewhere/site.yml:3", "/elsewhere/site.yml:3"),
        (f"{PROJECT}/odd:name/site.yml:3", "odd:name/site.yml:3"),
        (f"{PROJECT}2/site.yml:3", f"{PROJECT}2/site.yml:3"),
    ],
)
def test_a_location_is_shown_relative_to_the_project(location: str, expected: str) -> None:
    assert short_location(location, PROJECT) == expected


# What ansible-playbook prints when a playbook or role does not parse.
YAML_ERROR_2_21 = """\
[WARNING]: No inventory was parsed, only implicit localhost is available
[ERROR]: YAML parsing failed: While scanning a quoted scalar found unexpected end of stream.
Origin: /opt/ansible/playbooks/broken.yml:9:1

(source not shown: file truncated)
"""
MODULE_ERROR_2_21 = """\
[ERROR]: couldn't resolve module/action 'bogus_module_x'. This often indicates a misspelling, \
missing collection, or incorrect module path.
Origin: /opt/ansible/roles/r/tasks/main.yml:3:3

1 - name: a
2   debug: msg=1
3 - name: b
    ^ column 3
"""
YAML_ERROR_2_18 = """\
[WARNING]: No inventory was parsed, only implicit localhost is available
ERROR! We were unable to read either as JSON nor YAML, these are the errors we got from each:
JSON: Expecting value: line 1 column 1 (char 0)

Syntax Error while loading YAML.
  found unexpected end of stream

The error appears to be in '/opt/ansible/playbooks/broken.yml': line 9, column 1, but may
be elsewhere in the file depending on the exact syntax problem.
"""
# A long path: the sentence wraps before the line number.
MODULE_ERROR_2_18 = """\
ERROR! couldn't resolve module/action 'bogus_module_x'. This often indicates a misspelling.

The error appears to be in '/opt/ansible/roles/a-role-with-a-very-long-name/tasks/main.yml': line
4, column 3, but may be elsewhere in the file depending on the exact syntax problem.
"""


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            YAML_ERROR_2_21,
            "playbooks/broken.yml:9: YAML parsing failed: While scanning a quoted scalar "
            "found unexpected end of stream.",
        ),
        (
            MODULE_ERROR_2_21,
            "roles/r/tasks/main.yml:3: couldn't resolve module/action 'bogus_module_x'. This "
            "often indicates a misspelling, missing collection, or incorrect module path.",
        ),
        (
            YAML_ERROR_2_18,
            "playbooks/broken.yml:9: We were unable to read either as JSON nor YAML, these are "
            "the errors we got from each: JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        (
            MODULE_ERROR_2_18,
            "roles/a-role-with-a-very-long-name/tasks/main.yml:4: couldn't resolve "
            "module/action 'bogus_module_x'. This often indicates a misspelling.",
        ),
        (
            "[ERROR]: the connection plugin 'x' was not found\n",
            "the connection plugin 'x' was not found",
        ),
        ("PLAY [localhost]\nok: [localhost]\n", ""),
    ],
)
def test_a_run_that_does_not_parse_says_where(output: str, expected: str) -> None:
    assert located_error(output, PROJECT) == expected


# -- roles that cannot be found at start-up --------------------------------------------


def role_error(
    project: Path, role: str, env: dict[str, str] | None = None, roles: tuple[str, ...] = ()
) -> str:
    for name in roles:
        (project / "roles" / name / "tasks").mkdir(parents=True, exist_ok=True)
    watches = project / "watches.yaml"
    watches.write_text(f"- version: v1\n  group: example.com\n  kind: App\n  role: {role}\n")
    with pytest.raises(WatchesError) as info:
        load_watches(watches, env=env or {}, cwd=project)
    [problem] = info.value.problems
    return problem


def test_a_misspelt_role_gets_a_did_you_mean_and_no_roles_roles_path(tmp_path: Path) -> None:
    # As in the image: ANSIBLE_ROLES_PATH is the project's roles directory.
    env = {"ANSIBLE_ROLES_PATH": str(tmp_path / "roles")}
    problem = role_error(tmp_path, "webap", env, roles=("webapp", "database"))
    assert problem == (
        f"{tmp_path}/watches.yaml:4: 'role': role 'webap' not found (did you mean 'webapp'?); "
        f"looked in: {tmp_path}/roles/webap, {tmp_path}/webap"
    )


def test_a_roles_path_that_does_not_exist_is_said_so(tmp_path: Path) -> None:
    env = {"ANSIBLE_ROLES_PATH": str(tmp_path / "rolez")}
    problem = role_error(tmp_path, "webapp", env, roles=("other",))
    assert f"{tmp_path}/rolez/webapp (no directory {tmp_path}/rolez)" in problem
    assert "did you mean" not in problem


def test_a_role_given_as_a_path_is_suggested_as_a_path(tmp_path: Path) -> None:
    (tmp_path / "custom" / "thing" / "tasks").mkdir(parents=True)
    problem = role_error(tmp_path, "custom/thng")
    assert "role 'custom/thng' not found (did you mean 'custom/thing'?)" in problem


def requirements(project: Path, text: str) -> None:
    (project / "requirements.yml").write_text(text)


def no_collections(tmp_path: Path) -> dict[str, str]:
    return {
        "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "collections"),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",  # not the test's own site-packages
    }


def test_a_missing_collection_listed_in_requirements_says_to_install_them(tmp_path: Path) -> None:
    requirements(tmp_path, "collections:\n  - name: community.postgresql\n    version: '>=3'\n")
    problem = role_error(tmp_path, "community.postgresql.db", no_collections(tmp_path))
    assert problem == (
        f"{tmp_path}/watches.yaml:4: 'role': role 'community.postgresql.db' not found: "
        "collection 'community.postgresql' is not installed (looked in: "
        f"{tmp_path}/collections/ansible_collections/community/postgresql); requirements.yml "
        "lists it: install it with 'ansible-galaxy collection install -r requirements.yml'"
    )


def test_a_missing_collection_not_in_requirements_says_to_add_it(tmp_path: Path) -> None:
    requirements(tmp_path, "collections:\n  - kubernetes.core\n")
    problem = role_error(tmp_path, "community.postgresql.db", no_collections(tmp_path))
    assert problem.endswith(
        "requirements.yml does not list it: add it there, then run "
        "'ansible-galaxy collection install -r requirements.yml'"
    )


def test_a_missing_collection_without_requirements_names_the_command(tmp_path: Path) -> None:
    problem = role_error(tmp_path, "community.postgresql.db", no_collections(tmp_path))
    assert "install it with 'ansible-galaxy collection install community.postgresql'" in problem


def test_a_requirements_file_beside_the_watches_file_is_named_by_its_path(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    requirements(project, "collections: [community.postgresql]\n")
    watches = project / "watches.yaml"
    watches.write_text(
        "- version: v1\n  group: x.io\n  kind: App\n  role: community.postgresql.db\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(WatchesError) as info:
        load_watches(watches, env=no_collections(tmp_path), cwd=elsewhere)
    assert f"install -r {project}/requirements.yml'" in str(info.value)


def test_an_installed_collection_without_the_role_suggests_its_roles(tmp_path: Path) -> None:
    collection = tmp_path / "collections" / "ansible_collections" / "acme" / "apps"
    (collection / "roles" / "webapp" / "tasks").mkdir(parents=True)
    problem = role_error(tmp_path, "acme.apps.webap", no_collections(tmp_path))
    assert problem.endswith(
        f"role 'acme.apps.webap' not found: collection 'acme.apps' (at {collection}) has no "
        "role 'webap' (did you mean 'acme.apps.webapp'?)"
    )


def test_a_role_of_a_collection_on_the_python_path_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where Ansible finds it at run time, and where our image installs kubernetes.core.
    site = tmp_path / "site-packages"
    role = site / "ansible_collections" / "acme" / "apps" / "roles" / "webapp"
    (role / "tasks").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(site))
    watches = tmp_path / "watches.yaml"
    watches.write_text("- version: v1\n  group: x.io\n  kind: App\n  role: acme.apps.webapp\n")
    [watch] = load_watches(watches, env={}, cwd=tmp_path)
    assert watch.role == role.resolve()
