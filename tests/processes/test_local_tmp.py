"""Warm runs make a task's temporary directory in process on the local connection:
the same directory Ansible's shell commands would make, without the shells."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import action_loader, connection_loader

from ansible_operator.runner.warm.accelerations import local_tmp_in_process as local_tmp

PATCHED = ("_make_tmp_path", "_remove_tmp_path", "_remote_expand_user")


def local_action(remote_tmp: Path, *, become: bool = False) -> Any:
    context = PlayContext()
    context.become = become
    connection = connection_loader.get("local", context, "/dev/null")
    connection._shell.set_options(var_options={"ansible_remote_tmp": str(remote_tmp)})
    return action_loader.get(
        "normal",
        task=Task(),
        connection=connection,
        play_context=context,
        loader=DataLoader(),
        templar=None,
        shared_loader_obj=None,
    )


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PATCHED:  # restored after the test
        monkeypatch.setattr(ActionBase, name, getattr(ActionBase, name))
    local_tmp.install()


def shape(path: str) -> tuple[str, int, int]:
    directory = Path(path)
    return (
        re.sub(r"ansible-tmp-[\d.]+-\d+-\d+", "ansible-tmp-T-P-R", path),
        stat.S_IMODE(directory.stat().st_mode),
        stat.S_IMODE(directory.parent.stat().st_mode),
    )


def test_same_directory_as_ansibles_shell_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_shell = shape(local_action(tmp_path / "tmp")._make_tmp_path())
    install(monkeypatch)
    action = local_action(tmp_path / "tmp")

    def no_shell(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a shell was started: {args}")

    action._connection.exec_command = no_shell
    in_process = action._make_tmp_path()
    assert shape(in_process) == by_shell
    assert in_process.endswith("/") and action._connection._shell.tmpdir == in_process
    action._remove_tmp_path(None)
    assert not Path(in_process).exists()
    assert action._connection._shell.tmpdir is None
    assert action._remote_expand_user("~/x", sudoable=False) == str(Path.home() / "x")


def test_become_still_goes_through_the_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch)
    action = local_action(tmp_path / "tmp", become=True)
    started: list[str] = []

    def record(command: str, *args: Any, **kwargs: Any) -> tuple[int, bytes, bytes]:
        started.append(command)
        return 1, b"", b"refused"

    action._connection.exec_command = record
    with pytest.raises(Exception, match="temporary directory"):
        action._make_tmp_path()
    assert started and "mkdir" in started[-1]
