"""A warm run that reads only the settings it can read otherwise (acceleration
`settings-read-once`) ends with the same Ansible settings as one that reads
them all: with a runtime setting changed, relative paths resolved in its own
working directory, and a temporary directory of its own. Real ansible-core,
in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# In a fresh interpreter: Ansible's constants are the process's own.
SCRIPT = """
import json, os, sys
from ansible_operator.runner.warm import acceleration, hits
from ansible_operator.runner.warm import ansible_settings as settings
from ansible_operator.runner.warm.accelerations import settings_read_once as read_once

warm_dir, run_dir = sys.argv[1:3]
os.chdir(warm_dir)
settings.remember_preload_settings(dict(os.environ))
from ansible import constants
acceleration.probe([read_once.ACCELERATION])
read_once.note_settings_per_directory()
warm_tmp = constants.DEFAULT_LOCAL_TMP

# The run: elsewhere, another roles path (a runtime setting).
os.chdir(run_dir)
os.environ.update(json.loads(sys.argv[3]))
selective_read = read_once.read_otherwise(dict(os.environ)) is not None
settings.reread_ansible_settings(read_once.to_reread(dict(os.environ)))
names = sorted(constants.config.get_configuration_definitions())
selective = {name: repr(getattr(constants, name, None)) for name in names}
run_tmp = constants.DEFAULT_LOCAL_TMP
settings.reread_ansible_settings()  # all of them, as without the acceleration
every = {name: repr(getattr(constants, name, None)) for name in names}
differing = sorted(n for n in names if selective[n] != every[n] and n != "DEFAULT_LOCAL_TMP")
print(json.dumps({
    "on": acceleration.enabled(read_once.NAME) and selective_read,
    "differing": differing,
    "roles_path": list(constants.DEFAULT_ROLES_PATH),
    "own_tmp": run_tmp != warm_tmp and os.path.isdir(run_tmp),
    "per_directory": sorted(read_once._per_directory),
}))
"""


def run_settings(tmp_path: Path, preload: dict[str, str], run: dict[str, str]) -> dict:
    warm_dir, run_dir = tmp_path / "warm", tmp_path / "run"
    warm_dir.mkdir()
    run_dir.mkdir()
    env = {**os.environ, **preload, "ANSIBLE_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(warm_dir), str(run_dir), json.dumps(run)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_changed_runtime_setting_reads_as_a_full_read(tmp_path: Path) -> None:
    found = run_settings(
        tmp_path, {"ANSIBLE_ROLES_PATH": "/srv/roles"}, {"ANSIBLE_ROLES_PATH": "/opt/roles"}
    )
    assert found["on"]
    assert found["differing"] == []
    assert found["roles_path"] == ["/opt/roles"]
    assert found["own_tmp"]


def test_a_relative_path_resolves_in_the_runs_directory(tmp_path: Path) -> None:
    roles = {"ANSIBLE_ROLES_PATH": "roles"}
    found = run_settings(tmp_path, roles, roles)
    assert found["on"]
    assert "DEFAULT_ROLES_PATH" in found["per_directory"]
    assert found["differing"] == []
    assert found["roles_path"] == [str(tmp_path / "run" / "roles")]


def test_only_temporary_paths_are_read_again_otherwise(tmp_path: Path) -> None:
    found = run_settings(tmp_path, {"ANSIBLE_ROLES_PATH": "/srv/roles"}, {})
    assert found["on"]
    assert found["per_directory"] == ["DEFAULT_LOCAL_TMP"]
    assert found["differing"] == []
    assert found["own_tmp"]
