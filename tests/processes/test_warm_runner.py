"""The warm runner runs a role as `ansible-runner run` does: same events,
same outcome, same artifacts; a run with other Ansible settings starts a
fresh ansible-playbook; a run that times out takes all its processes along.
Real ansible-runner and ansible-core, no cluster."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.runner import rundir
from ansible_operator.runner.environment import ansible_environment
from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.plan import new_ident
from ansible_operator.runner.process import RunSpec, execute
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.warm.processes import WarmProcesses, start_warm_processes

TASKS = """
- name: a fact
  set_fact:
    doubled: "{{ number * 2 }}"
- name: a command
  command: echo "{{ doubled }}"
  register: echoed
  changed_when: true
- name: the role's own module
  greet:
    name: "{{ echoed.stdout }}"
  register: greeted
- name: say the greeting
  debug:
    msg: "the role says {{ greeted.greeting }}"
- name: it failed if asked to
  fail:
    msg: "asked to fail after {{ greeted.greeting }}"
  when: fail_please | default(false)
"""
MODULE = """
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec={"name": {"type": "str"}})
module.exit_json(changed=False, greeting="hello " + module.params["name"])
"""
HANG = """
- name: hang
  command: sleep 300
"""


@pytest.fixture
def roles(tmp_path: Path) -> Path:
    root = tmp_path / "roles"
    (root / "demo" / "tasks").mkdir(parents=True)
    (root / "demo" / "library").mkdir()
    (root / "demo" / "tasks" / "main.yml").write_text(TASKS)
    (root / "demo" / "library" / "greet.py").write_text(MODULE)
    (root / "hang" / "tasks").mkdir(parents=True)
    (root / "hang" / "tasks" / "main.yml").write_text(HANG)
    return root


@pytest.fixture
async def warm(tmp_path: Path) -> AsyncIterator[WarmProcesses]:
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o700)
    env = ansible_environment(roles_path=None, collections_path=None, pipelining=True)
    processes = await start_warm_processes(scratch, env)
    yield processes
    await processes.stop()


async def run_role(
    receiver: EventReceiver,
    tmp_path: Path,
    role: Path,
    extravars: dict[str, Any],
    *,
    warm: WarmProcesses | None,
    run_timeout: float | None = None,
    extra_env: dict[str, str] | None = None,
) -> RunResult:
    summary = RunSummary()
    channel = receiver.open_channel(summary.add)
    mode = "warm" if warm else "reference"
    run_dir = rundir.prepare(
        tmp_path / "runs" / mode / role.name,
        extravars=extravars,
        envvars={},
        kubeconfig=None,
        interpreter=warm.interpreter if warm else None,
    )
    env = {
        SOCKET_ENV: str(receiver.socket_path),
        TOKEN_ENV: channel.token,
        **ansible_environment(roles_path=None, collections_path=None, pipelining=bool(warm)),
        **(extra_env or {}),
    }
    spec = RunSpec(
        run_dir=run_dir,
        role=role,
        playbook=None,
        ident=new_ident(),
        verbosity=0,
        timeout=run_timeout,
        env=env,
    )
    try:
        return await execute(spec, summary, launcher=warm)
    finally:
        receiver.close_channel(channel)


def artifacts(result: RunResult, tmp_path: Path, mode: str, role: str) -> Path:
    return tmp_path / "runs" / mode / role / "artifacts" / result.ident


async def test_warm_and_reference_runs_agree(
    receiver: EventReceiver, warm: WarmProcesses, roles: Path, tmp_path: Path
) -> None:
    outcomes = {}
    for mode, processes in (("reference", None), ("warm", warm)):
        result = await run_role(receiver, tmp_path, roles / "demo", {"number": 21}, warm=processes)
        assert result.succeeded, result.message
        stats = result.stats
        assert stats is not None
        outcomes[mode] = (stats.ok, stats.changed, stats.failures, result.last_task)
        stdout = (artifacts(result, tmp_path, mode, "demo") / "stdout").read_text()
        # What the role's own module returned, printed by the role: 21 doubled, echoed, greeted.
        assert '"msg": "the role says hello 42"' in stdout
        assert (artifacts(result, tmp_path, mode, "demo") / "rc").read_text() == "0"
        events = list((artifacts(result, tmp_path, mode, "demo") / "job_events").glob("*.json"))
        names = {json.loads(path.read_text())["event"] for path in events}
        assert {"playbook_on_task_start", "runner_on_ok", "playbook_on_stats"} <= names
    assert outcomes["warm"] == outcomes["reference"]


async def test_a_failing_task_fails_the_same_way(
    receiver: EventReceiver, warm: WarmProcesses, roles: Path, tmp_path: Path
) -> None:
    messages = []
    for processes in (None, warm):
        result = await run_role(
            receiver, tmp_path, roles / "demo", {"number": 1, "fail_please": True}, warm=processes
        )
        assert not result.succeeded
        messages.append(result.message)
    assert messages[0] == messages[1]
    assert "asked to fail after hello 2" in messages[1]


async def test_other_ansible_settings_get_a_fresh_ansible_playbook(
    receiver: EventReceiver, warm: WarmProcesses, roles: Path, tmp_path: Path
) -> None:
    result = await run_role(
        receiver,
        tmp_path,
        roles / "demo",
        {"number": 2},
        warm=warm,
        extra_env={"ANSIBLE_FORKS": "3"},
    )
    assert result.succeeded, result.message
    stdout = (artifacts(result, tmp_path, "warm", "demo") / "stdout").read_text()
    assert "settings differ from the warm runner's (ANSIBLE_FORKS)" in stdout


def processes_running(pattern: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if pattern in command and state != "Z":
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("mode", ["reference", "warm"])
async def test_a_timed_out_run_takes_every_process_along(
    receiver: EventReceiver, warm: WarmProcesses, roles: Path, tmp_path: Path, mode: str
) -> None:
    # A sleep of its own: 300.<pid><mode> seconds.
    duration = f"300.{os.getpid()}{1 if mode == 'warm' else 2}"
    hang = roles / "hang" / "tasks" / "main.yml"
    hang.write_text(HANG.replace("sleep 300", f"sleep {duration}"))
    # Long enough for a fresh ansible-playbook to reach the task on a busy machine.
    result = await run_role(
        receiver, tmp_path, roles / "hang", {}, warm=warm if mode == "warm" else None, run_timeout=8
    )
    assert result.status == "timeout"
    assert "run timed out after 8s (last task: hang)" in result.message
    assert processes_running(f"sleep {duration}") == []
