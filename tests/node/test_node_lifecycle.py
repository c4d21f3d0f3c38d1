"""`ansible-operator cluster up --node` and `cluster down`, as a user runs
them: a Pod runs in between, and afterwards nothing of the node is left on
the machine: no process, mount, cgroup, address, bridge or iptables rule."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client, config
from nodeops import SessionNode, has_default_service_account, pod_phase, python_pod, wait_for

from ansible_operator.cluster.host import IMAGE_PACKAGES, NODE_PACKAGES, ensure_packages
from ansible_operator.cluster.images import ImageBuilder
from ansible_operator.cluster.node import containerd_root, node_unavailable_reason

pytestmark = pytest.mark.node

# Where kubelet, containerd and the CNI plugins write whatever they are told.
WRITTEN_ANYWAY = (
    "/run/containerd",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/usr/libexec/kubernetes",
)
NODE_PROGRAMS = {"containerd", "containerd-shim-runc-v2", "catatonit", "pause", "runc"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ansible_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def node_processes() -> list[str]:
    """containerd, its shims, runc, the Pods' pause processes, and kubelet (our
    multi-call binary's `kubelet` command)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        program = Path(argv[0].decode(errors="replace")).name
        if program in NODE_PROGRAMS or (len(argv) > 1 and argv[1] == b"kubelet"):
            found.append(f"{proc.name} {program}")
    return found


def host_state(state_dir: Path) -> dict[str, object]:
    """What a node changes on the host, read with the host's own tools. Mounts
    and cgroups are those of a node (other work on this machine makes its own)."""
    # Packet counters, and the "# Generated/Completed on <time>" lines: not state.
    volatile = re.compile(r"\[\d+:\d+\]|^#.*\n", re.M)
    node_places = (str(state_dir), "/run/containerd", "/run/netns", "/run/ansible-operator-node",
                   str(containerd_root()), "/var/lib/kubelet")  # fmt: skip

    def run(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    return {
        "mounts": sorted(
            point
            for point in (line.split()[4] for line in Path("/proc/self/mountinfo").open())
            if point.startswith(node_places)
        ),
        "cgroups": sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/kubepods*")),
        "addresses": run("ip", "-brief", "addr", "show"),
        "links": sorted(line.split()[0] for line in run("ip", "-brief", "link").splitlines()),
        "iptables": volatile.sub("", run("iptables-save")),
        "ip6tables": volatile.sub("", run("ip6tables-save")),
        "nftables": run("nft", "list", "ruleset"),
        "ip_forward": Path("/proc/sys/net/ipv4/ip_forward").read_text(),
        "netns": sorted(p.name for p in Path("/run/netns").glob("*")),
        "paths": sorted(path for path in WRITTEN_ANYWAY if Path(path).exists()),
    }


def test_cluster_down_leaves_nothing_of_the_node_behind(
    session_node: SessionNode, tmp_path: Path
) -> None:
    session_node.stop()  # the machine's one node slot, for this test's own cluster
    reason = node_unavailable_reason()  # another session may have taken it
    if reason:
        pytest.skip(f"no node here: {reason}")
    state_dir = tmp_path / "cluster"
    # Packages a node installs stay (they are not the node's): on a fresh
    # machine they come now, before what is compared is taken.
    ensure_packages({**NODE_PACKAGES, **IMAGE_PACKAGES}, print)
    before = host_state(state_dir)
    assert node_processes() == []

    up = cli("cluster", "--state-dir", str(state_dir), "up", "--node")
    try:
        assert up.returncode == 0, up.stderr
        assert "with node local-node" in up.stderr
        status = cli("cluster", "--state-dir", str(state_dir), "status")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert report["node"]["ready"] is True
        assert report["processes"]["kube-scheduler"]["running"] is True
        node_running = {name: p["running"] for name, p in report["node"]["processes"].items()}
        assert node_running == {"containerd": True, "kubelet": True}

        loaded = cli("cluster", "--state-dir", str(state_dir), "images", "python")
        assert loaded.returncode == 0, loaded.stderr
        api = config.new_client_from_config(str(state_dir / "admin.kubeconfig"))
        core = client.CoreV1Api(api)
        wait_for(lambda: has_default_service_account(core, "default"), "the default SA")
        image = ImageBuilder().test_python()
        sleeper = python_pod("sleeper", image, "import time; time.sleep(600)")
        core.create_namespaced_pod("default", sleeper)
        wait_for(lambda: pod_phase(core, "default", "sleeper") == "Running", "sleeper Running")
        during = host_state(state_dir)
        assert node_processes()
        # What the checks below look at did change while the node ran.
        for what in ("mounts", "cgroups", "addresses", "links", "iptables"):
            assert during[what] != before[what], what
        api.close()
    finally:
        down = cli("cluster", "--state-dir", str(state_dir), "down")
    assert down.returncode == 0, down.stderr

    after = host_state(state_dir)
    assert node_processes() == []
    for what, value in before.items():
        assert after[what] == value, f"{what} differs after cluster down"
