"""The unit tier is pure: a test here that starts a process (Ansible, git, a
plugin) fails, saying where it belongs (tests/processes)."""

from __future__ import annotations

import os
import subprocess
from typing import Any, NoReturn

import pytest

from ansible_operator.runner.ansible_paths import ansible_search_paths

WHERE = "tests/unit starts no process: a test that needs one belongs in tests/processes"


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise AssertionError(WHERE)


@pytest.fixture(scope="session", autouse=True)
def ansible_search_paths_known() -> None:
    """A run's environment names Ansible's roles and collections paths, which a
    child Python tells once per operator (and test session): asked here, before
    the guard, it is the one process this tier starts."""
    ansible_search_paths()


@pytest.fixture(autouse=True)
def no_processes(monkeypatch: pytest.MonkeyPatch, ansible_search_paths_known: None) -> None:
    # Popen's child-starting step is where subprocess.run and asyncio's
    # subprocesses both end up.
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse)
    monkeypatch.setattr(os, "fork", _refuse)
    monkeypatch.setattr(os, "posix_spawn", _refuse)
