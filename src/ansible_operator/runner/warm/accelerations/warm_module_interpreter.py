"""Modules run in forks of a warm interpreter (acceleration `warm-module-interpreter`).

The interpreter is a process of the warm runner's (module_server.py: what it
imports, the shim runs name as their Python, a run's session of it); this is
its record: the probe that a program run through the shim answers as under
plain Python. No installer: the warm runner opens each run a session of it,
and the operator names the shim as the runs' interpreter, when it is on.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ansible_operator.runner.warm.acceleration import Acceleration, Unavailable, require

NAME = "warm-module-interpreter"
PROBE_TIMEOUT = 30.0
# Run through the shim by the probe: what a module's payload does first.
PROBE_PROGRAM = b"""
import sys
from ansible.module_utils.basic import AnsibleModule
print(AnsibleModule.__name__)
sys.exit(3)
"""
_shim: Path | None = None  # the warm runner's (module_server.write_shim)


def configure(shim: Path) -> None:
    """In the warm runner, once the shim is written: the one to probe."""
    global _shim
    _shim = shim


def probe() -> None:
    """A program run through the shim, as Ansible runs a pipelined module
    (the program on stdin), imports Ansible's module_utils and comes back
    with its output and exit code, as under plain Python."""
    shim = _shim
    require(shim is not None, "no interpreter shim was written")
    try:
        done = subprocess.run(
            [str(shim)],
            input=PROBE_PROGRAM,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Unavailable(f"the shim did not run: {error!r}") from error
    require(
        done.returncode == 3 and done.stdout.strip() == b"AnsibleModule",
        "a program run through the shim did not answer as under Python "
        f"(exit code {done.returncode}, stderr {done.stderr.decode(errors='replace')[-300:]!r})",
    )


ACCELERATION = Acceleration(
    name=NAME,
    saves="a Python start and ~0.4 s of imports per task: modules run in forks "
    "of an interpreter that imported module_utils and the Kubernetes client once",
    relies_on="a module payload runs as a script under any Python named as "
    "ansible_python_interpreter, pipelined on stdin",
    probe=probe,
)
