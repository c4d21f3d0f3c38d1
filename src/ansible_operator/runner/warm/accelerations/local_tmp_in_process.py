"""Task temporary directories on the local connection, made in process
(warm runs; acceleration `local-tmp-in-process`).

Action plugins that transfer files (kubernetes.core's `k8s` among them, even
with pipelining) make a temporary directory for every task and remove it
afterwards, each step a shell command: `echo ~user`, `mkdir`, `rm -rf`, three
processes per task. On the local connection without become, those commands
act on this machine as this user, so doing the same here gives the same
directories (same place, same name pattern, mode 0700) without the
processes. Anything else (another connection, become, a network plugin) goes
Ansible's way.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    parameters_of,
    require,
    used,
)

NAME = "local-tmp-in-process"
# What install() replaces, with the parameters Ansible passes them, and what
# the replacements call.
REPLACED = {
    "_make_tmp_path": ("remote_user",),
    "_remove_tmp_path": ("tmp_path", "force"),
    "_remote_expand_user": ("path", "sudoable", "pathsep"),
}
CALLED = ("_should_remove_tmp_path", "get_shell_option", "_get_remote_user")


def _plain_local(action: Any) -> bool:
    connection = action._connection
    return (
        getattr(connection, "transport", None) == "local"
        and not getattr(connection, "_remote_is_local", False)
        and not action._play_context.become
    )


def probe() -> None:
    from ansible.errors import AnsibleConnectionFailure
    from ansible.plugins.action import ActionBase
    from ansible.plugins.shell import ShellBase

    for method, expected in REPLACED.items():
        found = getattr(ActionBase, method, None)
        require(callable(found), f"ansible's ActionBase.{method} is missing")
        missing = set(expected) - parameters_of(found)  # type: ignore[arg-type]
        require(not missing, f"ActionBase.{method} takes no {', '.join(sorted(missing))}")
    for method in CALLED:
        require(callable(getattr(ActionBase, method, None)), f"ActionBase.{method} is missing")
    require(
        callable(getattr(ShellBase, "_generate_temp_dir_name", None))
        and callable(getattr(ShellBase, "join_path", None)),
        "ansible's ShellBase._generate_temp_dir_name or join_path is missing",
    )
    require(issubclass(AnsibleConnectionFailure, Exception), "AnsibleConnectionFailure is missing")


def install() -> None:
    from ansible.errors import AnsibleConnectionFailure
    from ansible.plugins.action import ActionBase
    from ansible.utils.display import Display

    display = Display()
    make_tmp_path = ActionBase._make_tmp_path
    remove_tmp_path = ActionBase._remove_tmp_path
    remote_expand_user = ActionBase._remote_expand_user

    def expand_user(self: Any, path: str, sudoable: bool = True, pathsep: Any = None) -> str:
        if not path.startswith("~") or not _plain_local(self):
            return remote_expand_user(self, path, sudoable, pathsep)
        head, _, rest = path.partition(os.path.sep)
        if head == "~":
            head = "~" + (self._get_remote_user() or "")
        # As `echo ~user` in the shell: the home from the user database, or
        # $HOME for the bare tilde; an unknown user stays as written.
        home = Path(head).expanduser()
        return str(home / rest) if rest else str(home)

    def make(self: Any, remote_user: str | None = None) -> str:
        if not _plain_local(self):
            return make_tmp_path(self, remote_user)
        shell = self._connection._shell
        base = self._remote_expand_user(
            self.get_shell_option("remote_tmp", default="~/.ansible/tmp"), sudoable=False
        )
        base = Path(os.path.expandvars(base))  # as the shell's `mkdir -p $(echo base)` does
        path = base / shell._generate_temp_dir_name()
        previous = os.umask(0o077)
        try:
            base.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except OSError as error:
            raise AnsibleConnectionFailure(
                f"Failed to create temporary directory {path}: {error}"
            ) from error
        finally:
            os.umask(previous)
        display.vvv(f"made {path} in process (local connection)")
        used(NAME)
        self._cleanup_remote_tmp = True
        shell.tmpdir = shell.join_path(str(path), "")
        return shell.tmpdir

    def remove(self: Any, tmp_path: str | None, force: bool = False) -> None:
        if not _plain_local(self):
            return remove_tmp_path(self, tmp_path, force)
        shell = self._connection._shell
        if tmp_path is None and shell.tmpdir:
            tmp_path = shell.tmpdir
        if tmp_path and (force or self._should_remove_tmp_path(tmp_path)):
            shutil.rmtree(tmp_path, ignore_errors=True)  # as `rm -f -r ... 2>/dev/null`
            shell.tmpdir = None
        return None

    ActionBase._remote_expand_user = expand_user  # type: ignore[method-assign]
    ActionBase._make_tmp_path = make  # type: ignore[method-assign]
    ActionBase._remove_tmp_path = remove  # type: ignore[method-assign]


ACCELERATION = Acceleration(
    name=NAME,
    saves="three shell commands per file-transferring task (echo ~, mkdir, rm -rf)",
    relies_on="ActionBase._make_tmp_path, _remove_tmp_path, _remote_expand_user; "
    "ShellBase._generate_temp_dir_name",
    probe=probe,
    installs=(Install(Phase.PLAYBOOK, lambda _context: install()),),
)
