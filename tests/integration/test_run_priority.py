"""Admission runs come before reconcile runs when the CPU runs out: every process a
reconcile run starts (ansible-runner, ansible-playbook, its modules and what they
start) runs at a lower priority (nice 10) than the operator and admission runs
(nice 0), as `ps -o ni` would show, in both runner modes. Real ansible-runner and
ansible-core, no cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_operator.kube.types import Owner
from ansible_operator.observability.metrics import Metrics
from ansible_operator.runner import priority
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.host import RunnerHost
from ansible_operator.runner.launcher import ReferenceLauncher
from ansible_operator.runner.plan import RunPlan, new_ident
from ansible_operator.runner.warm.launcher import WarmLauncher
from ansible_operator.settings import RunSettings, Settings

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


class NoProxy:
    """Runs here need no API: a grant with no credentials."""

    def grant(
        self, owner: Owner, *, writes: bool = True, owns: bool = True, dry_run: bool = False
    ) -> RunAccess:
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


def plan_of(role: Path, nice: int) -> RunPlan:
    return RunPlan(
        ident=new_ident(),
        owner=OWNER,
        described="kind=ConfigMap namespace=ns name=cm",
        subject=Path("cm"),
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
    tmp_path: Path, role: Path, scratch: Path, mode: str
) -> None:
    said: list[str] = []

    def hear(event: dict[str, object]) -> None:
        result = (event.get("event_data") or {}).get("res") or {}  # type: ignore[union-attr]
        if isinstance(result, dict) and str(result.get("msg", "")).startswith("nice "):
            said.append(str(result["msg"]))

    settings = Settings(runs=RunSettings(runner_mode=mode))
    metrics = Metrics()
    launcher = (
        WarmLauncher(settings=settings, scratch=scratch, metrics=metrics)
        if mode == "warm"
        else ReferenceLauncher()
    )
    host = RunnerHost(
        settings=settings,
        access=NoProxy(),
        runner_root=tmp_path / "runs",
        scratch=scratch,
        metrics=metrics,
        max_runs=1,
        launcher=launcher,
        contain=False,
    )
    await host.start()
    try:
        assert (await host.launcher.mode()).name == mode  # the warm processes started
        for nice in (priority.RECONCILE, priority.ADMISSION):
            result = await host.run(plan_of(role, nice), on_event=hear)
            assert result.succeeded, result.message
    finally:
        await host.stop()

    ours = os.nice(0)  # the operator's own (this test's), from which runs yield
    lowered = min(ours + priority.RECONCILE, priority.MAX_NICE)
    assert said == [f"nice shell={lowered} module={lowered}", f"nice shell={ours} module={ours}"]
