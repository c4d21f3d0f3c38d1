"""`ansible-operator reconcile --debugger`: Ansible's task debugger on a failed
task, on the user's terminal (here a pseudo-terminal the test types into):
the prompt names the task, what is typed is answered, `c` lets the failure
stand (exit 1, the task's message), `r` runs the task again as changed at
the prompt, `q` ends the run, a run that does not fail
never stops, and no event mark of ansible-runner's reaches the screen."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest
import yaml
from greetings import GROUP, OPERATOR, VERSION

from ansible_operator.cluster import Cluster

pytestmark = pytest.mark.cluster

PROMPT = r"\[localhost\] TASK: greeting : Fail when asked to \(debug\)> "
TIMEOUT = 120  # seconds for each expectation: a run's start on a loaded machine


def greeting(path: Path, name: str, **spec: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Greeting",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    )
    return path


def debugger(cluster: Cluster, namespace: str, obj: Path) -> pexpect.spawn:
    """`reconcile --debugger` on a terminal of its own, 40x200."""
    return pexpect.spawn(
        sys.executable,
        [
            "-m",
            "ansible_operator.cli",
            "reconcile",
            "--debugger",
            "--create",
            "-n",
            namespace,
            "-f",
            str(obj),
        ],
        cwd=str(OPERATOR),
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "TERM": "dumb"},
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )


def finished(child: pexpect.spawn) -> str:
    child.expect(pexpect.EOF)
    child.close()
    return child.before


def test_a_failed_task_opens_the_debugger_which_answers_and_continues(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path
) -> None:
    child = debugger(
        kube_cluster, kube_namespace, greeting(tmp_path / "sad.yaml", "sad", failWith="disk full")
    )
    child.expect(PROMPT)
    shown = child.before
    assert "TASK [greeting : Write the greeting ConfigMap]" in shown
    assert 'fatal: [localhost]: FAILED! => {"changed": false, "msg": "disk full"}' in shown

    child.sendline("p task.name")
    child.expect(PROMPT)
    assert "'Fail when asked to'" in child.before
    child.sendline("p task.args['msg']")
    child.expect(PROMPT)
    assert "'disk full'" in child.before
    child.sendline("c")

    rest = finished(child)
    assert child.exitstatus == 1, rest
    assert "PLAY RECAP" in rest
    assert 'FAILED: task "Fail when asked to" (' in rest and ") failed: disk full" in rest
    assert "Failure            True" in rest
    assert "\x1b[K" not in shown + rest  # ansible-runner's event marks stay off the screen


def test_a_task_changed_and_run_again_then_quitting_ends_the_run(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path
) -> None:
    child = debugger(
        kube_cluster, kube_namespace, greeting(tmp_path / "sad.yaml", "quit", failWith="no")
    )
    child.expect(PROMPT)
    child.sendline("task.args['msg'] = 'changed at the prompt'")
    child.expect(PROMPT)
    child.sendline("r")  # the task again, with what was changed
    child.expect(PROMPT)
    assert '"msg": "changed at the prompt"' in child.before
    child.sendline("q")
    rest = finished(child)
    assert child.exitstatus == 1, rest
    assert "User interrupted execution" in rest
    assert "PLAY RECAP" not in rest
    assert "reconcile of Greeting quit FAILED" in rest


def test_a_run_that_does_not_fail_never_stops(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path
) -> None:
    child = debugger(
        kube_cluster, kube_namespace, greeting(tmp_path / "ok.yaml", "fine", greetingMessage="hi")
    )
    rest = finished(child)
    assert child.exitstatus == 0, rest
    assert "(debug)>" not in rest
    assert "reconcile of Greeting fine succeeded" in rest
