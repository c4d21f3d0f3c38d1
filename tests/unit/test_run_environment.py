"""The Ansible settings every run gets name directories that exist: a path
that points nowhere fails no run, it only loses what the directory brings
(our no_log reporter, and with it the redaction of what no_log tasks were given)."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_operator.runner.environment import ansible_environment


def test_every_run_loads_our_no_log_reporter() -> None:
    env = ansible_environment(roles_path=None, collections_path=None, pipelining=False)
    callbacks = [Path(p) for p in env["ANSIBLE_CALLBACK_PLUGINS"].split(os.pathsep) if p]
    assert any((p / "ansible_operator_no_log.py").is_file() for p in callbacks), callbacks


def test_our_collection_is_found_first() -> None:
    env = ansible_environment(roles_path=None, collections_path=None, pipelining=False)
    first = Path(env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)[0])
    assert (first / "ansible_collections" / "operator_sdk" / "util").is_dir(), first
