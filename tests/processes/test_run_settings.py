"""Run settings that Operator SDK projects rely on: quoted --ansible-args,
facts, and where Ansible finds roles and collections."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_operator.collections import COLLECTIONS_PATH
from ansible_operator.runner import ansible_paths
from ansible_operator.runner.environment import ansible_environment
from ansible_operator.settings.ansible import facts_skipped, unquoted


@pytest.mark.parametrize(
    ("given", "passed"),
    [
        (
            "'--vault-password-file /opt/ansible/pwd.yml'",
            "--vault-password-file /opt/ansible/pwd.yml",
        ),
        ('"--tags a,b"', "--tags a,b"),
        ("--tags a,b", "--tags a,b"),
        ("-e 'x=1 y=2'", "-e 'x=1 y=2'"),  # inner quoting is the user's
        ("'-e x=1\"", "'-e x=1\""),  # mismatched: left as written
        ("''", ""),
        ("", ""),
    ],
)
def test_one_pair_of_quotes_around_ansible_args_is_stripped(given: str, passed: str) -> None:
    assert unquoted(given) == passed


IN_A_POD = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}


@pytest.mark.parametrize(
    ("environ", "skipped"),
    [
        ({}, True),  # a local run, as the deployed manifest (ANSIBLE_GATHERING=explicit)
        (IN_A_POD, False),  # as the reference: the manifest decides
        ({"ANSIBLE_GATHERING": "explicit"}, True),
        ({"ANSIBLE_GATHERING": "explicit", **IN_A_POD}, True),
        ({"ANSIBLE_GATHERING": "smart"}, False),
        ({"ANSIBLE_GATHERING": "implicit"}, False),
        ({"ANSIBLE_GATHERING": "implicit", **IN_A_POD}, False),
    ],
)
def test_facts_are_skipped_with_ansible_gathering_explicit_or_unset_outside_a_pod(
    environ: dict[str, str], skipped: bool
) -> None:
    assert facts_skipped(environ) is skipped


@pytest.fixture
def fresh_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Ansible's paths asked anew, from a clean environment and working directory."""
    for name in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_ROLES_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    ansible_paths.ansible_search_paths.cache_clear()
    yield tmp_path
    ansible_paths.ansible_search_paths.cache_clear()


def test_galaxy_collections_and_project_roles_are_found_beside_ours(fresh_paths: Path) -> None:
    env = ansible_environment(roles_path=None, collections_path=None, pipelining=False)
    collections = env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)
    assert collections[0] == str(COLLECTIONS_PATH)
    assert str(fresh_paths / "home" / ".ansible" / "collections") in collections
    roles = env["ANSIBLE_ROLES_PATH"].split(os.pathsep)
    assert str(fresh_paths / "home" / ".ansible" / "roles") in roles
    assert roles[-1] == str(fresh_paths / "roles")


def test_a_projects_ansible_cfg_paths_are_kept(fresh_paths: Path) -> None:
    (fresh_paths / "ansible.cfg").write_text(
        "[defaults]\ncollections_path = ./vendor/collections\nroles_path = ./vendor/roles\n"
    )
    env = ansible_environment(
        roles_path=None, collections_path="/extra/collections", pipelining=False
    )
    collections = env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)
    assert collections[:2] == [str(COLLECTIONS_PATH), "/extra/collections"]
    assert str(fresh_paths / "vendor" / "collections") in collections
    assert str(fresh_paths / "vendor" / "roles") in env["ANSIBLE_ROLES_PATH"].split(os.pathsep)


def test_ansible_roles_path_flag_replaces_ansibles_own_but_keeps_the_project_roles(
    fresh_paths: Path,
) -> None:
    env = ansible_environment(roles_path="/a:/b", collections_path=None, pipelining=False)
    assert env["ANSIBLE_ROLES_PATH"] == os.pathsep.join(["/a", "/b", str(fresh_paths / "roles")])


def test_the_environment_a_run_gets_finds_a_galaxy_collection(fresh_paths: Path) -> None:
    """ansible-galaxy's default install place, seen by ansible-playbook itself."""
    home = fresh_paths / "home"
    role = home / ".ansible/collections/ansible_collections/acme/tools/roles/hi/tasks/main.yml"
    role.parent.mkdir(parents=True)
    role.write_text("- ansible.builtin.debug:\n    msg: hi from acme\n")
    (fresh_paths / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles: [acme.tools.hi]\n"
    )
    env = {
        **os.environ,
        **ansible_environment(roles_path=None, collections_path=None, pipelining=False),
    }
    result = subprocess.run(
        [Path(sys.executable).parent / "ansible-playbook", "-i", "localhost,", "play.yml"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hi from acme" in result.stdout
