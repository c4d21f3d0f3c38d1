"""Faults survived: every object ends in its correct final state, no dependent
is duplicated, no finalizer is removed without its run, nothing stays Running."""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from faultops import (
    GROUP,
    VERSION,
    StartOperator,
    all_gone,
    converged,
    create,
    delete,
    failed,
    get,
    patch_spec,
)
from kubernetes import client

from ansible_operator.cluster import LocalControlPlane
from ansible_operator.runner import proctree
from ansible_operator.testing.metrics import gvk_label
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.reading import config_map, events_for
from ansible_operator.testing.waiting import eventually
from holds import Hold

WORK = gvk_label(GROUP, VERSION, "Work")


def wait_for_a_run(operator: OperatorProcess) -> None:
    """Until a Work run is in flight, as the operator's metrics show it."""
    eventually(
        lambda: operator.metric("ansible_operator_runs_in_flight", GVK=WORK) >= 1,
        timeout=60,
        what="a Work run in flight",
    )


pytestmark = pytest.mark.cluster


def owned_output(api: client.ApiClient, namespace: str, name: str) -> str:
    """The Work's ConfigMap: one controller reference, to that Work; its value."""
    config = client.CoreV1Api(api).read_namespaced_config_map(f"{name}-out", namespace)
    owners = config.metadata.owner_references or []
    assert [(o.kind, o.name, o.controller) for o in owners] == [("Work", name, True)]
    return (config.data or {})["value"]


def count_finalizer_runs(api: client.ApiClient, namespace: str) -> None:
    """The ConfigMap the finalizer role counts its runs in (the test's own:
    made by a run, it would be owned by that object and go with it)."""
    client.CoreV1Api(api).create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="finalizer-runs"))
    )


def finalizer_runs(api: client.ApiClient, namespace: str) -> dict[str, str]:
    return config_map(api, namespace, "finalizer-runs") or {}


def test_api_server_stopped_for_10s_mid_run_then_everything_converges(
    control_plane: LocalControlPlane,
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
) -> None:
    operator = start_operator(args=[SERVE_METRICS])
    names = [f"w{i}" for i in range(4)]
    for name in names:
        create(kube_api, kube_namespace, "Work", name, value=name, sleep=3)
    wait_for_a_run(operator)
    control_plane.stop_component("kube-apiserver")
    time.sleep(10)  # the outage itself
    control_plane.start_component("kube-apiserver")
    control_plane.wait_ready()
    for name in names:
        obj = converged(kube_api, kube_namespace, "Work", name, timeout=180)
        assert obj["status"]["value"] == name
        assert owned_output(kube_api, kube_namespace, name) == name
    assert operator.process is not None and operator.process.poll() is None


def test_operator_killed_mid_run_then_restarted_converges_and_corrects_drift(
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    first = start_operator()
    hold = Hold(tmp_path)
    names = [f"k{i}" for i in range(4)]
    for name in names:
        create(kube_api, kube_namespace, "Work", name, value=name, hold=str(hold.path))
    hold.wait_reached()  # a run is mid-task
    assert first.process is not None
    processes = proctree.tree(first.process.pid)
    first.kill()
    all_gone(processes)  # no run of the dead operator goes on writing
    hold.release()

    second = start_operator(args=[SERVE_METRICS])
    for name in names:
        obj = converged(kube_api, kube_namespace, "Work", name)
        assert obj["status"]["value"] == name
        assert owned_output(kube_api, kube_namespace, name) == name
    # The restarted operator watches the dependents again: drift is put back.
    client.CoreV1Api(kube_api).patch_namespaced_config_map(
        "k0-out", kube_namespace, {"data": {"value": "drifted"}}
    )
    eventually(
        lambda: owned_output(kube_api, kube_namespace, "k0") == "k0",
        timeout=60,
        what="the drifted ConfigMap put back",
    )
    assert second.metric("ansible_operator_run_duration_seconds_count", GVK=WORK) >= 1


def _etcd(control_plane: LocalControlPlane, path: str, body: dict[str, object]) -> dict:
    assert control_plane.state is not None
    request = urllib.request.Request(
        f"http://127.0.0.1:{control_plane.state.etcd_port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_compacted_watch_history_relists_without_missing_a_change(
    control_plane: LocalControlPlane,
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
) -> None:
    operator = start_operator()
    count_finalizer_runs(kube_api, kube_namespace)
    for name in ("a", "b", "c"):
        create(kube_api, kube_namespace, "Work", name, value=f"{name}1")
    for name in ("a", "b", "c"):
        converged(kube_api, kube_namespace, "Work", name)
    assert operator.process is not None
    os.kill(operator.process.pid, signal.SIGSTOP)  # its watches fall behind
    try:
        patch_spec(kube_api, kube_namespace, "Work", "a", value="a2")
        delete(kube_api, kube_namespace, "Work", "b")
        create(kube_api, kube_namespace, "Work", "d", value="d1")
        # Forget the history the operator's watches would resume from, and
        # restart the API server so that they must resume.
        key = base64.b64encode(b"/").decode()
        revision = _etcd(control_plane, "/v3/kv/range", {"key": key})["header"]["revision"]
        _etcd(control_plane, "/v3/kv/compaction", {"revision": revision, "physical": True})
        control_plane.stop_component("kube-apiserver")
        control_plane.start_component("kube-apiserver")
        control_plane.wait_ready()
    finally:
        os.kill(operator.process.pid, signal.SIGCONT)
    obj = converged(kube_api, kube_namespace, "Work", "a")
    assert obj["status"]["value"] == "a2"
    assert owned_output(kube_api, kube_namespace, "a") == "a2"
    assert converged(kube_api, kube_namespace, "Work", "d")["status"]["value"] == "d1"
    eventually(
        lambda: get(kube_api, kube_namespace, "Work", "b") is None,
        timeout=90,
        what="b deleted (after its finalizer)",
    )
    assert finalizer_runs(kube_api, kube_namespace).get("b") == "1"
    assert converged(kube_api, kube_namespace, "Work", "c")["status"]["value"] == "c1"
    # What an operator's user reads of it: the history was gone, the watch relisted.
    assert "watch expired, relisting" in operator.logs


def test_a_concurrent_writer_of_spec_and_status_loses_nothing(
    start_operator: StartOperator, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    start_operator()
    create(kube_api, kube_namespace, "Work", "busy", value="v0", sleep=1)
    custom = client.CustomObjectsApi(kube_api)
    stop = threading.Event()
    written = {"spec": "v0", "external": 0}

    def writer() -> None:
        count = 0
        while not stop.is_set():
            count += 1
            if count % 3 == 0:
                written["spec"] = f"v{count}"
                patch_spec(kube_api, kube_namespace, "Work", "busy", value=written["spec"])
            custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                kube_namespace,
                "works",
                "busy",
                {"status": {"external": count}},
            )
            written["external"] = count
            time.sleep(0.25)

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(12)
    stop.set()
    thread.join()
    obj = converged(kube_api, kube_namespace, "Work", "busy", timeout=120)
    status = obj["status"]
    assert status["value"] == written["spec"]  # the role's own key, for the last spec
    assert status["external"] == written["external"]  # the other writer's key kept
    assert owned_output(kube_api, kube_namespace, "busy") == written["spec"]


def test_deleted_during_a_run_the_finalizer_runs_after_it_once(
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    operator = start_operator()
    count_finalizer_runs(kube_api, kube_namespace)
    hold = Hold(tmp_path)
    create(kube_api, kube_namespace, "Work", "doomed", value="x", hold=str(hold.path))
    hold.wait_reached()
    delete(kube_api, kube_namespace, "Work", "doomed")
    hold.release()
    eventually(
        lambda: get(kube_api, kube_namespace, "Work", "doomed") is None,
        timeout=90,
        what="doomed gone",
    )
    assert finalizer_runs(kube_api, kube_namespace) == {"doomed": "1"}
    lines = [line for line in operator.logs.splitlines() if "name=doomed" in line]
    started = [i for i, line in enumerate(lines) if "run started" in line]
    ended = [
        i
        for i, line in enumerate(lines)
        if "run succeeded kind=" in line or "run failed kind=" in line
    ]
    assert len(started) == 2 and len(ended) == 2, "\n".join(lines)
    assert started[0] < ended[0] < started[1] < ended[1]  # never two runs at once


def test_a_hanging_role_times_out_is_retried_and_others_are_served(
    start_operator: StartOperator, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    sleep_for = f"600.{os.getpid()}"
    operator = start_operator()
    create(kube_api, kube_namespace, "Hang", "stuck", sleep_for=sleep_for)
    create(kube_api, kube_namespace, "Work", "fine", value="ok")
    failure = failed(kube_api, kube_namespace, "Hang", "stuck")
    assert failure["reason"] == "RunTimeout"
    assert "run timed out after 3s (last task: Never finish)" in failure["message"]
    assert converged(kube_api, kube_namespace, "Work", "fine")["status"]["value"] == "ok"
    # Retried with backoff, unchanged: the user sees the RunTimeout Event counted again.
    eventually(
        lambda: (
            sum(
                event.count or 1
                for event in events_for(kube_api, kube_namespace, "stuck")
                if event.reason == "RunTimeout"
            )
            >= 2
        ),
        timeout=60,
        what="the timed-out run retried, its RunTimeout Event counted twice",
    )
    reasons = {event.reason for event in events_for(kube_api, kube_namespace, "stuck")}
    assert "RunTimeout" in reasons
    assert operator.process is not None
    tree = proctree.tree(operator.process.pid)
    # A timed-out run's command is killed with it: at most the retry's sleep runs.
    sleeps = [
        pid
        for pid in tree
        if sleep_for in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    ]
    assert len(sleeps) <= 1


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_a_role_printing_megabytes_leaves_operator_memory_bounded(
    start_operator: StartOperator, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    operator = start_operator()
    assert operator.process is not None
    create(kube_api, kube_namespace, "Work", "warmup", value="w")
    converged(kube_api, kube_namespace, "Work", "warmup")
    before = _rss_mib(operator.process.pid)
    create(kube_api, kube_namespace, "Chatty", "talker", lines=1500)  # ~6 MB, 1500 events
    converged(kube_api, kube_namespace, "Chatty", "talker", timeout=300)
    grown = _rss_mib(operator.process.pid) - before
    assert grown < 64, f"the operator grew by {grown:.0f} MiB over one chatty run"
    create(kube_api, kube_namespace, "Work", "after", value="a")
    assert converged(kube_api, kube_namespace, "Work", "after")["status"]["value"] == "a"
