"""What every run's environment adds for Ansible, warm or reference.

Our collection (`operator_sdk.util`) and `--ansible-collections-path` before
where Ansible would look anyway; `--ansible-roles-path` (else Ansible's own
roles path) and then the working directory's `roles/`, as Operator SDK's
operator finds a project's roles; our callback plugins beside any of the
operator's. The warm runner imports Ansible with the same environment, so
that what Ansible reads at import is what a run would have read.

`ansible_environment` is a function of its arguments when it is given where
the operator runs (`search`, `cwd`, `environ`: runner/configuration.py reads
them once); without them it reads this process's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ansible_operator.collections import COLLECTIONS_PATH
from ansible_operator.runner.ansible_paths import SearchPaths, ansible_search_paths, joined

# runner/callback_plugins: the plugins every run loads (our no_log reporter, see
# redaction.py, and the refusal of vars_prompt).
OWN_CALLBACKS = Path(__file__).resolve().parent / "callback_plugins"


def ansible_environment(
    *,
    roles_path: str | None,
    collections_path: str | None,
    pipelining: bool,
    search: SearchPaths | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The Ansible settings every run of this operator gets. `pipelining`:
    modules go to their interpreter on stdin (the warm module interpreter's
    way) unless the operator's environment says otherwise."""
    search = ansible_search_paths() if search is None else search
    cwd = Path.cwd() if cwd is None else cwd
    environ = os.environ if environ is None else environ
    collections = [str(COLLECTIONS_PATH)]
    if collections_path:
        collections += collections_path.split(os.pathsep)
    collections += search.collections
    roles = roles_path.split(os.pathsep) if roles_path else list(search.roles)
    roles.append(str(cwd / "roles"))
    env = {"ANSIBLE_COLLECTIONS_PATH": joined(collections), "ANSIBLE_ROLES_PATH": joined(roles)}
    callbacks = [str(OWN_CALLBACKS), environ.get("ANSIBLE_CALLBACK_PLUGINS", "")]
    env["ANSIBLE_CALLBACK_PLUGINS"] = joined(callbacks)
    if pipelining and "ANSIBLE_PIPELINING" not in environ:
        # Modules go to the warm interpreter on stdin: no temporary file
        # copied, made executable and removed for every task.
        env["ANSIBLE_PIPELINING"] = "True"
    return env


def with_our_python(env: Mapping[str, str], python: str = sys.executable) -> dict[str, str]:
    """`env` with our interpreter's directory first on PATH: ansible-runner
    execs ansible-playbook by name, and it must be the one installed beside
    our interpreter, even when the operator's venv is not on PATH."""
    found = dict(env)
    found["PATH"] = os.pathsep.join(filter(None, [str(Path(python).parent), env.get("PATH")]))
    return found
