"""Starting and stopping the local control plane leaves no process behind,
whether it is stopped by `cluster down`, or its parent dies without cleanup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client, config

from ansible_operator.cluster import Cluster

pytestmark = pytest.mark.cluster


def processes_under(state_dir: Path) -> list[int]:
    """PIDs of processes whose command line mentions the state directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(state_dir) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until_no_process(state_dir: Path, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while processes_under(state_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_under(state_dir) == []


@pytest.fixture
def local_only(kube_cluster: Cluster) -> None:
    if kube_cluster.source != "local":
        pytest.skip("exercises our own local control plane")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ansible_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def test_cluster_up_status_down_as_a_user_would(local_only: None, tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    up = cli("cluster", "--state-dir", str(state_dir), "up")
    assert up.returncode == 0, up.stderr
    kubeconfig = state_dir / "admin.kubeconfig"
    assert f"export KUBECONFIG={kubeconfig}" in up.stdout
    assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
    try:
        status = cli("cluster", "--state-dir", str(state_dir), "status")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert report["ready"] is True
        assert set(report["processes"]) == {"etcd", "kube-apiserver", "kube-controller-manager"}

        with config.new_client_from_config(str(kubeconfig)) as api:
            names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
        assert {"default", "kube-system"} <= names
        assert len(processes_under(state_dir)) == 3
    finally:
        down = cli("cluster", "--state-dir", str(state_dir), "down")
    assert down.returncode == 0, down.stderr
    wait_until_no_process(state_dir)
    assert cli("cluster", "--state-dir", str(state_dir), "status").returncode == 1


def test_attached_control_plane_dies_with_its_parent_even_on_sigkill(
    local_only: None, tmp_path: Path
) -> None:
    state_dir = tmp_path / "attached"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from ansible_operator.cluster import provide\n"
        "with provide(Path(sys.argv[1]), use_kubeconfig=False) as cluster:\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "ready"
        children = [pid for pid in processes_under(state_dir) if pid != parent.pid]
        assert len(children) == 3
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    wait_until_no_process(state_dir)
