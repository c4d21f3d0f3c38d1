"""Where no node can run (no root, another node on the machine), `cluster up
--node` says why and starts the API-only control plane, as before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_operator import cli
from ansible_operator.cluster import host, node

pytestmark = pytest.mark.cluster


def test_node_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host.os, "geteuid", lambda: 1000)
    reason = host.node_unavailable_reason()
    assert reason is not None and "needs root" in reason


def test_cluster_up_node_without_a_node_says_why_and_stays_api_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.environ.get("KUBEBUILDER_ASSETS"):
        pytest.skip("exercises our own local control plane (envtest binaries have no node)")
    # Where `cluster up` asks (it loads the node's code when it runs).
    monkeypatch.setattr(node, "node_unavailable_reason", lambda: "a node needs root (test)")
    state = str(tmp_path / "cluster")
    try:
        assert cli.main(["cluster", "--state-dir", state, "up", "--node"]) == 0
        up = capsys.readouterr()
        assert "no node: a node needs root (test); starting the API-only control plane" in up.err
        assert cli.main(["cluster", "--state-dir", state, "status"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert "node" not in report
        assert set(report["processes"]) == {"etcd", "kube-apiserver", "kube-controller-manager"}
    finally:
        assert cli.main(["cluster", "--state-dir", state, "down"]) == 0
