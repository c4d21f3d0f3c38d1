"""Runs that escape, or reach too far: a process a role leaves behind
(`setsid nohup sleep ... &`) ends at the run's end, its timeout and the
operator's shutdown; a run cannot find another run's kubeconfig; a run that
prints or allocates without bound is stopped, and the Failure says why.
In both runner modes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_operator import (
    GROUP,
    OPERATOR,
    RUNNER_MODES,
    VERSION,
    condition,
    create,
    files_under,
    sleeping,
    start,
    unique_sleep,
    wait_gone,
)
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.runner import cgroups
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import config_map
from ansible_operator.testing.waiting import eventually
from holds import Hold

pytestmark = pytest.mark.cluster
MEMORY_LIMIT = "512Mi"
OUTPUT_CAP = "1Mi"


@pytest.fixture(scope="module", params=RUNNER_MODES)
def operator(
    request: pytest.FixtureRequest,
    kube_cluster: Cluster,
    attack_crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[OperatorProcess, Path]]:
    scratch = tmp_path_factory.mktemp(f"isolation-{request.param}")
    runs = scratch / "runs"
    process = start(
        kube_cluster,
        scratch / "operator.log",
        mode=request.param,
        args=[
            f"--runner-dir={runs}",
            f"--max-run-output={OUTPUT_CAP}",
            f"--run-memory-limit={MEMORY_LIMIT}",
        ],
    )
    yield process, runs
    process.stop()


def test_a_process_a_role_leaves_behind_ends_with_the_run(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    marker = unique_sleep()
    create(kube_api, kube_namespace, "Escape", "left", marker=marker)
    condition(kube_api, kube_namespace, "Escape", "left", "Successful")  # it was started
    wait_gone(marker)


def test_a_process_a_role_leaves_behind_ends_with_the_runs_timeout(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    marker = unique_sleep()
    create(kube_api, kube_namespace, "TimedEscape", "late", marker=marker, hold=600)
    eventually(lambda: sleeping(marker), what=f"the role's `sleep {marker}` running")
    failure = condition(kube_api, kube_namespace, "TimedEscape", "late", "Failure")
    assert failure["reason"] == "RunTimeout"
    wait_gone(marker)


@pytest.mark.parametrize("mode", RUNNER_MODES)
def test_a_process_a_role_leaves_behind_ends_at_the_operators_shutdown(
    mode: str,
    kube_cluster: Cluster,
    attack_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    # A kind only this operator watches: it is the one to stop.
    watches = tmp_path / "watches.yaml"
    watches.write_text(
        f"- {{version: {VERSION}, group: {GROUP}, kind: HeldEscape, "
        f"role: {OPERATOR / 'roles' / 'escape'}}}\n"
    )
    process = start(
        kube_cluster,
        tmp_path / "operator.log",
        mode=mode,
        args=["--graceful-shutdown-timeout=1s"],
        watches=watches,
    )
    marker, hold = unique_sleep(), unique_sleep(600)
    try:
        create(kube_api, kube_namespace, "HeldEscape", "held", marker=marker, hold=hold)
        eventually(lambda: sleeping(marker), what=f"the role's `sleep {marker}` running")
        eventually(lambda: sleeping(hold), what="the run at its task 'Hold'")
    finally:
        process.stop()  # SIGTERM while the run holds
    wait_gone(marker)


def test_a_run_cannot_find_another_runs_kubeconfig(
    operator: tuple[OperatorProcess, Path],
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    _process, runs = operator
    hold = Hold(tmp_path)
    create(kube_api, kube_namespace, "Thief", "victim", hold=str(hold.path))
    hold.wait_reached()
    victims_private = Path(hold.reached_marker.read_text()).parent
    assert victims_private.is_dir()
    # While the victim's run holds its kubeconfig, the thief looks for it
    # where the layout of run directories would put it.
    create(kube_api, kube_namespace, "Thief", "thief", victim="victim")
    loot = eventually(
        lambda: config_map(kube_api, kube_namespace, "thief-loot"),
        timeout=60,
        what="the thief's report",
    )
    assert loot["found"] == ""
    hold.release()
    condition(kube_api, kube_namespace, "Thief", "victim", "Successful")
    victim = runs / GROUP / VERSION / "Thief" / kube_namespace / "victim"
    assert not [p for p in files_under(victim) if p.name == "kubeconfig"]
    # Other runs of this module's operator (a timed-out one retrying) may be in flight.
    assert not victims_private.exists(), "the run's private directory outlived it"


def test_a_role_printing_without_bound_is_stopped_at_the_output_cap(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    _process, runs = operator
    create(kube_api, kube_namespace, "Chatter", "loud", size=16 * 2**20)
    failure = condition(kube_api, kube_namespace, "Chatter", "loud", "Failure")
    assert f"printed more than {OUTPUT_CAP}" in failure["message"]
    # No event reached the operator, or the artifacts, whole.
    events = runs / GROUP / VERSION / "Chatter" / kube_namespace / "loud"
    sizes = [p.stat().st_size for p in files_under(events) if p.parent.name == "job_events"]
    assert sizes and max(sizes) < 2**20


def test_a_run_over_its_memory_limit_loses_the_process_and_says_so(
    operator: tuple[OperatorProcess, Path], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    if not any(h.version == 1 and h.controller == "memory" for h in cgroups.hierarchies()):
        pytest.skip("no writable memory cgroup on this host")
    create(kube_api, kube_namespace, "Hog", "greedy", megabytes=1536)
    failure = condition(kube_api, kube_namespace, "Hog", "greedy", "Failure")
    assert f"memory limit ({MEMORY_LIMIT}, --run-memory-limit)" in failure["message"]
