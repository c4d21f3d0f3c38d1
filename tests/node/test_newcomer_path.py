"""A newcomer's path, with the README's commands alone ("Starting a new
operator", "Deploying"): `init` and `create api --generate-role`, `make
image-load` (the image built FROM our base image as built on this machine, no
pull, loaded into the node), `make deploy` (`kubectl kustomize`, no download),
the sample Successful in the cluster; then a role edit and `make dev`, and the
next reconcile in the cluster runs the edited role. Prints each step's time."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from nodeops import NodeCluster, SessionNode, pod_logs, wait_for

from ansible_operator.cli import main as cli

pytestmark = [
    pytest.mark.node,
    pytest.mark.skipif(
        not (shutil.which("make") and shutil.which("kubectl")),
        reason="the generated Makefile runs make and kubectl",
    ),
]

PROJECT = "newcomer-operator"
SYSTEM = f"{PROJECT}-system"
GROUP, VERSION, PLURAL = "cache.example.com", "v1alpha1", "memcacheds"
SAMPLE = "memcached-sample"
ROLE_TASKS = Path("roles/memcached/tasks/main.yml")
DATA = '      data:\n        size: "{{ size | string }}"\n'
EDITED_DATA = DATA + '        edited: "yes"\n'


class Steps:
    """Times the path's steps, printed at the end (run pytest with -s to see them)."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []

    def run(self, what: str, action: object) -> object:
        started = time.monotonic()
        result = action() if callable(action) else None
        self.times.append((what, time.monotonic() - started))
        return result

    def report(self) -> str:
        return "\n".join(f"  {seconds:6.1f}s  {what}" for what, seconds in self.times)


def make(project: Path, cluster: NodeCluster, *targets: str) -> str:
    tools = Path(sys.executable).parent  # ansible-operator of this environment
    done = subprocess.run(
        ["make", *targets, f"ANSIBLE_OPERATOR={tools / 'ansible-operator'}"],
        cwd=project,
        env={**os.environ, "KUBECONFIG": str(cluster.plane.kubeconfig)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"make {' '.join(targets)}:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / PROJECT
    assert cli(["init", "--domain", "example.com", "--dir", str(directory)]) == 0
    assert (
        cli(
            [
                "create",
                "api",
                "--group",
                "cache",
                "--version",
                VERSION,
                "--kind",
                "Memcached",
                "--generate-role",
                "--dir",
                str(directory),
            ]
        )
        == 0
    )
    return directory


@pytest.fixture
def deployed(session_node: SessionNode, project: Path) -> Iterator[NodeCluster]:
    cluster = session_node.get()
    try:
        yield cluster
    finally:
        make(project, cluster, "undeploy", "ignore-not-found=true")


def config_map(cluster: NodeCluster) -> dict[str, str] | None:
    try:
        found = cluster.core.read_namespaced_config_map(f"{SAMPLE}-memcached", SYSTEM)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    return found.data


def successful(cluster: NodeCluster) -> bool:
    try:
        obj = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
            GROUP, VERSION, SYSTEM, PLURAL, SAMPLE
        )
    except client.ApiException as error:
        if error.status == 404:
            return False
        raise
    conditions = obj.get("status", {}).get("conditions", [])
    return any(c["type"] == "Successful" and c["status"] == "True" for c in conditions)


def test_init_to_a_pod_on_the_node_then_a_role_edit_in_seconds(
    project: Path, deployed: NodeCluster
) -> None:
    cluster = deployed
    steps = Steps()
    logs = lambda: pod_logs(cluster, SYSTEM, tail_lines=30)  # noqa: E731

    loaded = steps.run(
        "make image-load (build FROM the local base, load)",
        lambda: make(project, cluster, "image-load"),
    )
    assert "loaded docker.io/library/newcomer-operator:latest" in str(loaded), loaded
    steps.run("make deploy", lambda: make(project, cluster, "deploy"))
    sample = project / "config/samples/cache_v1alpha1_memcached.yaml"
    steps.run(
        "kubectl apply of the sample",
        lambda: subprocess.run(
            ["kubectl", "apply", "-n", SYSTEM, "-f", str(sample)],
            env={**os.environ, "KUBECONFIG": str(cluster.plane.kubeconfig)},
            check=True,
            capture_output=True,
        ),
    )
    steps.run(
        "the sample Successful, reconciled in the Pod",
        lambda: wait_for(
            lambda: successful(cluster), "the sample to be Successful", timeout=300, details=logs
        ),
    )
    assert config_map(cluster) == {"size": "2", "entries": "1,2"}

    tasks = project / ROLE_TASKS
    assert DATA in tasks.read_text()
    edited_at = time.monotonic()
    tasks.write_text(tasks.read_text().replace(DATA, EDITED_DATA))
    dev = steps.run(
        "make dev (rebuild the changed layers, load, restart)",
        lambda: make(project, cluster, "dev"),
    )
    steps.run(
        "the next reconcile runs the edited role",
        lambda: wait_for(
            lambda: (config_map(cluster) or {}).get("edited") == "yes",
            "the edited role's ConfigMap key",
            timeout=180,
            details=logs,
        ),
    )
    edit_loop = time.monotonic() - edited_at

    print(f"\nnewcomer path:\n{steps.report()}\n  {edit_loop:6.1f}s  edit -> in the cluster")
    print(dev)
    # Only the layers holding roles/ and playbooks/ went to the node, not the image.
    sent = re.search(r"([0-9.]+) MB of new layers", str(dev))
    assert sent and float(sent.group(1)) < 1, dev
