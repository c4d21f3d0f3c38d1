"""The names a spec may not set come from the installed ansible-core, read in a child
process (project/ansible_names.py): every variable it lists, sets for a task or reads
a plugin's options from, so a new release's names are refused without a change of ours
(2.21's `_task` was missed by the hand-written list this replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible import constants
from ansible.release import __version__

from ansible_operator.project import ansible_names


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No names read before, in this process or on disk: the child reads them."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(ansible_names, "_cached", None)
    return tmp_path


def test_the_names_are_those_of_the_installed_release(fresh: Path) -> None:
    found = ansible_names.reserved_by_ansible()
    print(f"\nansible-core {found.version}: {len(found.names)} reserved names")

    assert found.version == __version__
    listed = set(getattr(constants, "INTERNAL_STATIC_VARS", ())) | set(
        constants.COMMON_CONNECTION_VARS
    )
    listed |= {name for names in constants.MAGIC_VARIABLE_MAPPING.values() for name in names}
    assert listed <= found.names
    # Set for every task, read from every plugin's documentation, a template's global.
    assert {"playbook_dir", "role_path", "hostvars", "groups", "omit"} <= found.names
    assert {"ansible_become_exe", "ansible_ssh_common_args", "ansible_su_exe"} <= found.names
    # Functions of the templating are left to the data (`namespace`, `range` are fields).
    assert not {"lookup", "namespace", "range", "query"} & found.names


def test_a_release_that_sets_a_new_variable_has_it_refused(fresh: Path) -> None:
    found = ansible_names.reserved_by_ansible()
    major, minor = (int(part) for part in __version__.split(".")[:2])

    assert ("_task" in found.names) == ((major, minor) >= (2, 21))


def test_the_names_read_once_are_kept_for_the_next_start(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ansible_names.reserved_by_ansible()
    [kept] = (fresh / "ansible-operator").glob("ansible-names-*.json")
    monkeypatch.setattr(ansible_names, "_cached", None)  # another process, as it were

    assert ansible_names.reserved_by_ansible() == first
    kept.write_text("{not json")  # a damaged cache is read again, not trusted
    monkeypatch.setattr(ansible_names, "_cached", None)
    assert ansible_names.reserved_by_ansible() == first
