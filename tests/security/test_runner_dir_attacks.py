"""The runner directory as another local user, or the next operator, finds it:
no directory there may be listed or entered by group or others while a run is
in flight (its kubeconfig and inputs are inside), and the inputs of a run in
flight when its operator was killed (`kill -9`) are gone once an operator
starts again on the same directory, its artifacts kept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from attack_operator import (
    GROUP,
    VERSION,
    condition,
    create,
    delete,
    files_under,
    sleeping,
    start,
    unique_sleep,
    wait_gone,
)
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.metrics import gvk_label
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster
CREDENTIALS = ("kubeconfig", "extravars", "envvars", "cmdline")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def start_on(cluster: Cluster, runs: Path, log: Path, namespace: str) -> OperatorProcess:
    return start(
        cluster,
        log,
        mode="warm",
        args=[f"--runner-dir={runs}", "--graceful-shutdown-timeout=1s", SERVE_METRICS],
        env={"WATCH_NAMESPACE": namespace},  # the other tests' objects are not its business
    )


def directories_above_ansibles(top: Path) -> list[Path]:
    """Every directory under `top`, down to each run's artifact directory: what
    Ansible makes inside one while it runs (its fact cache, 0755) is behind
    it (0700) and made 0700 when the run's artifacts are redacted."""
    found = []
    for folder, directories, _files in os.walk(top):
        found.append(Path(folder))
        if Path(folder).parent.name == "artifacts":
            directories.clear()
    return found


def run_inputs(runs: Path) -> list[Path]:
    """The private directories of the runs in flight (the test may list them)."""
    private = runs / ".private"
    assert mode(private) == 0o300, "a run can list the private directories of the others"
    private.chmod(0o700)
    try:
        return sorted(private.iterdir())
    finally:
        private.chmod(0o300)


def test_no_directory_of_the_runner_dir_is_open_to_others_during_a_run(
    kube_cluster: Cluster,
    attack_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    runs = tmp_path / "made" / "runs"  # the operator makes both
    operator = start_on(kube_cluster, runs, tmp_path / "operator.log", kube_namespace)
    hold = unique_sleep()
    try:
        create(kube_api, kube_namespace, "Escape", "busy", marker=unique_sleep(), hold=hold)
        eventually(lambda: sleeping(hold), what=f"the run's `sleep {hold}` running")
        [inputs] = run_inputs(runs)
        (runs / ".private").chmod(0o700)  # to walk into it, as its owner could
        try:
            open_dirs = [
                f"{folder}: {oct(mode(folder))}"
                for folder in directories_above_ansibles(tmp_path / "made")
                if mode(folder) & 0o077
            ]
            open_files = [
                f"{path}: {oct(mode(path))}"
                for path in files_under(runs)
                if path.name in CREDENTIALS and mode(path) & 0o077
            ]
            kubeconfigs = [path for path in files_under(inputs) if path.name == "kubeconfig"]
        finally:
            (runs / ".private").chmod(0o300)
        assert open_dirs == []
        assert open_files == []
        assert kubeconfigs, "the run's kubeconfig was looked at"
    finally:
        operator.stop()
    wait_gone(hold)


def test_a_killed_operators_run_inputs_are_gone_when_the_next_one_starts(
    kube_cluster: Cluster,
    attack_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    first = start_on(kube_cluster, runs, tmp_path / "first.log", kube_namespace)
    hold = unique_sleep()
    try:
        create(kube_api, kube_namespace, "Escape", "done", marker=unique_sleep())
        condition(kube_api, kube_namespace, "Escape", "done", "Successful")
        create(kube_api, kube_namespace, "Escape", "inflight", marker=unique_sleep(), hold=hold)
        eventually(lambda: sleeping(hold), what=f"the run's `sleep {hold}` running")
        left = run_inputs(runs)
    finally:
        first.kill()  # kill -9: no cleanup of its own
    wait_gone(hold)
    runs_of = runs / GROUP / VERSION / "Escape" / kube_namespace
    kept = list((runs_of / "done" / "artifacts").iterdir())
    (runs / ".private").chmod(0o700)
    assert [path for path in files_under(left[0]) if path.name == "kubeconfig"], (
        "the killed run left its kubeconfig (the attack is set up)"
    )
    (runs / ".private").chmod(0o300)
    delete(kube_api, kube_namespace, "Escape", "inflight")  # nothing to run again

    second = start_on(kube_cluster, runs, tmp_path / "second.log", kube_namespace)
    try:
        assert not any(path.exists() for path in left), "a killed run's inputs outlived it"
        # Its own run of the object left alone (the only one in its namespace)
        # is over, as its metrics count runs: no run's inputs remain at all.
        escape = gvk_label(GROUP, VERSION, "Escape")
        eventually(
            lambda: (
                second.metric("ansible_operator_run_duration_seconds_count", GVK=escape) >= 1
                and second.metric("ansible_operator_runs_in_flight", GVK=escape) == 0
            ),
            what="the second operator's run of `done` over",
        )
        assert run_inputs(runs) == []
        assert [path for path in files_under(runs) if path.name in CREDENTIALS] == []
        assert set(kept) <= set((runs_of / "done" / "artifacts").iterdir()), "artifacts lost"
        assert "removed the private directories of runs an earlier operator" in second.logs
    finally:
        second.stop()
