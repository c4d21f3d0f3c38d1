"""Admission runs come before reconcile runs when the CPU runs out: every process a
reconcile run starts (ansible-runner, ansible-playbook, its modules and what they
start) runs at a lower priority (nice 10) than the operator and admission runs
(nice 0), as `ps -o ni` would show, in both runner modes. Real ansible-runner and
ansible-core, no cluster."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ansible_operator.kube.types import Owner
from ansible_operator.runner import priority
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.play import AnsiblePlayer, RunPlan
from ansible_operator.runner.process import RunSpec
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.warm.processes import (
    WarmProcesses,
    ansible_environment,
    start_warm_processes,
)
from ansible_operator.settings import Settings

OWNER = Owner(group="", version="v1", kind="ConfigMap", namespace="ns", name="cm", uid="")
# The nice value of a shell a command task starts, and of a Python module's own process.
TASKS = """
- name: a command's nice value
  command: sh -c 'cut -d " " -f 19 /proc/$$/stat'
  register: shell
- name: a module's nice value
  nice_value:
  register: module
- name: say both
  debug:
    msg: "nice shell={{ shell.stdout }} module={{ module.nice }}"
"""
MODULE = """
import os
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec={})
module.exit_json(changed=False, nice=os.nice(0))
"""


@contextlib.asynccontextmanager
async def held(_spec: RunSpec) -> AsyncIterator[None]:
    yield


class NoProxy:
    """Runs here need no API: a grant with no credentials."""

    def grant(self, owner: Owner, *, writes: bool = True) -> RunAccess:
        return RunAccess()


@pytest.fixture
def role(tmp_path: Path) -> Path:
    root = tmp_path / "roles" / "niceness"
    (root / "tasks").mkdir(parents=True)
    (root / "library").mkdir()
    (root / "tasks" / "main.yml").write_text(TASKS)
    (root / "library" / "nice_value.py").write_text(MODULE)
    return root


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "warm"
    path.mkdir(mode=0o700)
    return path


@contextlib.asynccontextmanager
async def processes_of(mode: str, scratch: Path) -> AsyncIterator[WarmProcesses | None]:
    if mode == "reference":
        yield None
        return
    env = ansible_environment(roles_path=None, collections_path=None, pipelining=True)
    warm = await start_warm_processes(scratch, env)
    try:
        yield warm
    finally:
        await warm.stop()


def plan_of(tmp_path: Path, role: Path, nice: int) -> RunPlan:
    return RunPlan(
        owner=OWNER,
        described="kind=ConfigMap namespace=ns name=cm",
        subject_dir=tmp_path / "runs" / "cm",
        role=role,
        playbook=None,
        extravars={},
        verbosity=0,
        timeout=300,
        keep_artifacts=1,
        skip_facts=True,
        nice=nice,
    )


@pytest.mark.parametrize("mode", ["reference", "warm"])
async def test_reconcile_runs_yield_the_cpu_to_admission_runs(
    tmp_path: Path, role: Path, scratch: Path, receiver: EventReceiver, mode: str
) -> None:
    said: list[str] = []

    def hear(event: dict[str, object]) -> None:
        result = (event.get("event_data") or {}).get("res") or {}  # type: ignore[union-attr]
        if isinstance(result, dict) and str(result.get("msg", "")).startswith("nice "):
            said.append(str(result["msg"]))

    async with processes_of(mode, scratch) as warm:
        player = AnsiblePlayer(
            options=Settings(),
            receiver=receiver,
            access=NoProxy(),
            runner_root=tmp_path / "runs",
            warm=lambda: warm,
            run_groups=lambda: None,
        )
        for nice in (priority.RECONCILE, priority.ADMISSION):
            plan = plan_of(tmp_path, role, nice)
            result = await player.play(plan, RunSummary(), hold=held, on_event=hear)
            assert result.succeeded, result.message

    ours = os.nice(0)  # the operator's own (this test's), from which runs yield
    lowered = min(ours + priority.RECONCILE, priority.MAX_NICE)
    assert said == [f"nice shell={lowered} module={lowered}", f"nice shell={ours} module={ours}"]
