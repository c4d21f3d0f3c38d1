"""The warm runner forked from the operator (runner/warm/zygote.py) runs a role
as the started one does, reaches the same verdicts, dies with the operator and
never outlives an operator that did not ask for it, and keeps the operator's
logging configuration away from the runs' modules. Real ansible-runner and
ansible-core, no cluster; the operator is tests/processes/zygote_operator.py."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ansible_operator.runner.environment import ansible_environment
from ansible_operator.runner.warm.processes import start_warm_processes

HERE = Path(__file__).resolve().parent
TASKS = """
- name: a fact
  set_fact:
    doubled: "{{ number * 2 }}"
- name: a command
  command: echo "{{ doubled }}"
  register: echoed
- name: say it
  debug:
    msg: "the role says {{ echoed.stdout }}"
- name: how logging is set up where modules run
  logging_state:
  register: logging
- name: say that
  debug:
    msg: "module logging level={{ logging.level }} handlers={{ logging.handlers }}"
"""
# What a module sees of Python's logging: the operator's (debug level, its
# handler on stderr) must not reach the runs and their modules.
LOGGING_STATE = """
import logging
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={})
root = logging.getLogger()
module.exit_json(level=root.level, handlers=len(root.handlers))
"""
GONE_TIMEOUT = 60.0  # seconds for the kernel to deliver a parent's death


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "roles" / "demo" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "demo" / "tasks" / "main.yml").write_text(TASKS)
    (tmp_path / "roles" / "demo" / "library").mkdir()
    (tmp_path / "roles" / "demo" / "library" / "logging_state.py").write_text(LOGGING_STATE)
    return tmp_path


@pytest.fixture
def operator(work: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "zygote_operator.py"), str(work), "play"],
        cwd=work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def report(operator: subprocess.Popen[str]) -> dict[str, object]:
    assert operator.stdout is not None
    line = operator.stdout.readline()
    assert line, f"the operator exited with {operator.wait()} before reporting"
    found = json.loads(line)
    assert isinstance(found, dict)
    return found


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[1])


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def wait_gone(pids: list[int]) -> list[int]:
    """The pids still alive (zombies count as gone) after waiting for all to go."""
    deadline = time.monotonic() + GONE_TIMEOUT
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.05)
    return alive


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def test_the_forked_warm_runner_plays_a_role_as_the_started_one(
    operator: subprocess.Popen[str], tmp_path: Path
) -> None:
    seen = report(operator)
    assert seen["succeeded"], seen["message"]
    assert '"msg": "the role says 42"' in str(seen["stdout"])
    # A fresh interpreter's logging, although the operator logs at debug level.
    assert f'"msg": "module logging level={logging.WARNING} handlers=0"' in str(seen["stdout"])
    # The operator's own fork, not a program it started.
    assert seen["warm_runner"] == seen["zygote"]
    assert parent_of(int(str(seen["warm_runner"]))) == operator.pid
    scratch = tmp_path / "started"
    scratch.mkdir(mode=0o700)
    env = ansible_environment(roles_path=None, collections_path=None, pipelining=True)
    started = await start_warm_processes(scratch, env, [{"role": str(tmp_path / "roles/demo")}])
    await started.stop()
    assert seen["off"] == sorted(
        name for name, verdict in started.accelerations.items() if not verdict.on
    )
    assert operator.stdin is not None
    operator.stdin.write("\n")
    operator.stdin.flush()
    assert report(operator) == {"warm_runner_exit": -signal.SIGKILL}
    assert operator.wait() == 0


def test_a_killed_operator_takes_its_forked_warm_runner_along(
    operator: subprocess.Popen[str],
) -> None:
    seen = report(operator)
    runner = int(str(seen["warm_runner"]))
    helpers = [runner, *children_of(runner)]  # the module interpreter among them
    assert len(helpers) >= 2
    os.kill(operator.pid, signal.SIGKILL)
    operator.wait()
    assert wait_gone(helpers) == []


def test_a_fork_never_asked_to_start_exits(work: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(HERE / "zygote_operator.py"), str(work), "discard"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["alive"] is False
