"""Admission (project/watch_admission.py) for tests that run no operator: Ansible's
variable names given rather than read from ansible-core in a child process, and, for
tests without Ansible (tests/unit), the cluster's variables written but not read back
with Ansible's loader (tests/security checks that they are)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ansible_operator.lint.assigned_vars import assigned_places
from ansible_operator.project.ansible_names import AnsibleNames
from ansible_operator.project.ansible_view import ExtraVars
from ansible_operator.project.extravars_file import Style, encode_cluster_vars
from ansible_operator.project.watch_admission import WatchAdmission

# The names ansible-core 2.21 reserves besides its `ansible_*` ones (ansible_names.py).
SOME_ANSIBLE_NAMES = frozenset(
    {"_task", "environment", "group_names", "groups", "hostvars", "inventory_hostname", "omit"}
    | {"play_hosts", "playbook_dir", "role_name", "role_names", "role_path", "vars"}
)


def written_only(cluster_vars: dict[str, Any]) -> ExtraVars:
    """The cluster's variables as a run's file holds them, not read back by Ansible."""
    return ExtraVars(cluster_vars, encode_cluster_vars(cluster_vars, Style.WHOLE))


def admission_without_ansible(
    names: Iterable[str] = SOME_ANSIBLE_NAMES, directory: Path | None = None
) -> WatchAdmission:
    """A WatchAdmission that knows `names` as Ansible's and imports no ansible-core;
    roles are read under `directory` (default: the current one)."""
    return WatchAdmission(
        directory or Path.cwd(),
        {},
        names=AnsibleNames("(given)", frozenset(names)),
        read_back=written_only,
        assigned=assigned_places,
    )
