"""The runner directory stays under its caps while runs keep coming: a real
operator against a real API server, five Greetings reconciled every second
with caps of 200 KiB and 60 files, far below what their runs' artifacts take.

Sampled while it runs, the directory never holds more than the caps plus one
run's worth (its artifacts and its inputs): before each run the operator holds
room for it, so only a run that writes more than the largest recent one can
pass the cap, and one worker runs one run at a time. The runs keep
succeeding, and the log names the pruned artifacts' objects.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from greetings import GROUP, VERSION, create, greeting, wait_successful
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.runner.disk_budget import Usage, measure
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess

pytestmark = pytest.mark.cluster

MAX_BYTES = 200 * 1024
MAX_FILES = 60
OBJECTS = 5
PRUNES = 20  # artifact directories pruned before the test is done: the caps hit again and again

WATCHES = f"""
- version: {VERSION}
  group: {GROUP}
  kind: Greeting
  role: chatty
  reconcilePeriod: 1s
"""
# A few events, so a run leaves a few dozen files of artifacts.
ROLE = """
- name: Say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
- name: Say it again
  ansible.builtin.debug:
    msg: "{{ range(20) | list }}"
- name: And once more
  ansible.builtin.debug:
    msg: bye
"""


@pytest.fixture
def runner_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def operator(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path, runner_dir: Path
) -> Iterator[OperatorProcess]:
    project = tmp_path / "project"
    (project / "roles" / "chatty" / "tasks").mkdir(parents=True)
    (project / "roles" / "chatty" / "tasks" / "main.yml").write_text(ROLE)
    (project / "watches.yaml").write_text(WATCHES)
    process = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace},
        args=[
            SERVE_METRICS,
            f"--runner-dir={runner_dir}",
            f"--runner-dir-max-size={MAX_BYTES // 1024}Ki",
            f"--runner-dir-max-files={MAX_FILES}",
            "--max-concurrent-reconciles=1",
        ],
    ).start()
    yield process
    process.stop()


def largest_run(runner_dir: Path) -> Usage:
    """The largest run's worth now in the directory: artifacts plus inputs."""
    artifacts = [measure(path) for path in runner_dir.glob("*/*/*/*/*/artifacts/*")]
    inputs = [measure(path) for path in (runner_dir / ".private").glob("*")]
    return Usage(
        max((usage.bytes for usage in artifacts), default=0)
        + max((usage.bytes for usage in inputs), default=0),
        max((usage.files for usage in artifacts), default=0)
        + max((usage.files for usage in inputs), default=0),
    )


def test_the_runner_directory_stays_under_its_caps_while_runs_keep_succeeding(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str, runner_dir: Path
) -> None:
    names = [f"g{index}" for index in range(OBJECTS)]
    for name in names:
        create(kube_api, kube_namespace, greeting(name))
    samples: list[Usage] = []
    worth = Usage()
    deadline = time.monotonic() + 240
    while operator.metric("ansible_operator_runner_artifacts_pruned_total") < PRUNES:
        assert time.monotonic() < deadline, f"fewer than {PRUNES} pruned:\n{operator.logs[-3000:]}"
        samples.append(measure(runner_dir))
        run = largest_run(runner_dir)
        worth = Usage(max(worth.bytes, run.bytes), max(worth.files, run.files))
    assert len(samples) > 20
    # Above the caps by at most one run's worth, at every sample.
    assert max(sample.bytes for sample in samples) <= MAX_BYTES + worth.bytes, (samples, worth)
    assert max(sample.files for sample in samples) <= MAX_FILES + worth.files, (samples, worth)
    # A run's artifacts alone pass a tenth of the files cap: the cap did its work.
    assert worth.files > MAX_FILES // 10
    # The runs kept succeeding, each object's last one among them.
    assert operator.metric("ansible_operator_run_duration_seconds_count", result="failed") == 0
    assert operator.metric("ansible_operator_run_duration_seconds_count") >= PRUNES
    for name in names:
        wait_successful(kube_api, kube_namespace, name)
    # The log names each pruned artifact directory's object, and what was freed.
    pruned = re.findall(
        rf"pruned run artifacts over the runner directory's cap kind=Greeting "
        rf"namespace={kube_namespace} name=(g\d) group={GROUP} version={VERSION} run=\S+ "
        rf"reason=(?:size|files) "
        rf"bytes=\d+ files=(\d+)",
        operator.logs,
    )
    assert {name for name, _files in pruned} == set(names)
    assert all(int(files) > 0 for _name, files in pruned)
    assert re.search(
        r"pruned the oldest artifacts .* freed_bytes=[1-9]\d* freed_files=[1-9]", operator.logs
    )
    # The gauges say what the directory holds, within the caps.
    assert 0 < operator.metric("ansible_operator_runner_dir_files") <= MAX_FILES + worth.files
