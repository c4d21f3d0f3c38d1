"""The shard-ring deploy variant (config/sharding, and the one `ansible-operator init`
writes): three replicas, `--shard-ring` in place of `--leader-elect`, each replica's
identity from the Downward API, spread over nodes, and RBAC for the ring's Leases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_operator.cli import main
from ansible_operator.settings.parsers import go_duration
from kustomize_render import find, render

CONFIG = Path(__file__).resolve().parents[2] / "config"
LEASE_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}


def plain_documents(*folders: str) -> list[dict[str, Any]]:
    return [
        doc
        for folder in folders
        for path in sorted((CONFIG / folder).glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def lease_verbs(docs: list[dict[str, Any]], account: str, namespace: str) -> set[str]:
    """What the Roles bound to the ServiceAccount let it do to Leases in its namespace."""
    bound = {
        binding["roleRef"]["name"]
        for binding in find(docs, "RoleBinding")
        if binding["metadata"]["namespace"] == namespace
        and binding["roleRef"]["kind"] == "Role"
        and {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        in binding["subjects"]
    }
    return {
        verb
        for role in find(docs, "Role")
        if role["metadata"]["name"] in bound and role["metadata"]["namespace"] == namespace
        for rule in role["rules"]
        if "coordination.k8s.io" in rule["apiGroups"] and "leases" in rule["resources"]
        for verb in rule["verbs"]
    }


def assert_a_ring_of_three(
    sharded: list[dict[str, Any]], plain: dict[str, Any], ring: str
) -> dict[str, Any]:
    """The sharded Deployment is the plain one with only the ring's changes."""
    [deployment] = find(sharded, "Deployment", plain["metadata"]["name"])
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [plain_container] = plain["spec"]["template"]["spec"]["containers"]
    assert "--leader-elect" in plain_container["args"]
    assert container["args"] == [
        f"--shard-ring={ring}" if arg == "--leader-elect" else arg
        for arg in plain_container["args"]
    ]
    assert not [a for a in container["args"] if a.split("=")[0] == "--leader-elect"]
    # The identity each replica's Lease is named after: its Pod's name.
    assert {
        "name": "POD_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    } in container["env"]
    assert [e for e in container["env"] if e["name"] != "POD_NAME"] == plain_container["env"]
    # Spread over nodes where the scheduler can, never refused for want of nodes.
    anti = pod["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in anti
    [preferred] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    # A stopping replica finishes its runs and deletes its Lease before it is killed.
    timeout = next(
        a.split("=", 1)[1] for a in container["args"] if a.startswith("--graceful-shutdown")
    )
    assert pod["terminationGracePeriodSeconds"] > go_duration(timeout)
    account, namespace = pod["serviceAccountName"], deployment["metadata"]["namespace"]
    assert lease_verbs(sharded, account, namespace) >= LEASE_VERBS
    return deployment


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


# -- this repository's config/sharding ---------------------------------------------------


def test_the_overlay_runs_three_replicas_in_a_ring() -> None:
    sharded = render(CONFIG / "sharding")
    [plain] = find(plain_documents("manager"), "Deployment")
    leader_id = next(
        arg.split("=", 1)[1]
        for arg in plain["spec"]["template"]["spec"]["containers"][0]["args"]
        if arg.startswith("--leader-election-id=")
    )

    assert_a_ring_of_three(sharded, plain, ring=leader_id)


def test_the_overlay_deploys_what_the_plain_manifests_do_and_changes_only_the_ring() -> None:
    """Everything `kubectl apply -f config/manager/manager.yaml -f config/rbac/ -f
    config/webhook/` applies is in the overlay (a file added there must be added to
    it); only the Deployment and the Lease Role differ."""
    plain = {key(doc): doc for doc in plain_documents("manager", "rbac", "webhook")}
    sharded = {key(doc): doc for doc in render(CONFIG / "sharding")}

    assert sharded.keys() == plain.keys()
    changed = {k for k in plain if plain[k] != sharded[k]}
    assert changed == {
        ("Deployment", "ansible-operator-system", "ansible-operator"),
        ("Role", "ansible-operator-system", "ansible-operator-leader-election"),
    }
    # The leader-elected deployment keeps its narrower Lease Role.
    account = ("ansible-operator", "ansible-operator-system")
    assert lease_verbs(list(plain.values()), *account) == {"get", "watch", "create", "update"}


def test_the_overlay_is_no_file_the_bundle_reads() -> None:
    """`ansible-operator bundle` reads every YAML file under this repository's config/
    but kustomizations: the overlay adds no second Deployment or Role to the bundle."""
    assert [p.name for p in (CONFIG / "sharding").iterdir()] == ["kustomization.yaml"]


# -- the scaffold's config/sharding ------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "memcached-operator"
    assert main(["init", "--domain", "example.com", "--dir", str(path)]) == 0
    return path


def test_a_new_project_gets_the_overlay(project: Path) -> None:
    sharded = render(project / "config" / "sharding")
    plain = render(project / "config" / "default")
    [deployment] = find(plain, "Deployment")

    assert_a_ring_of_three(sharded, deployment, ring="memcached-operator")
    assert {key(d) for d in sharded} == {key(d) for d in plain}
    makefile = (project / "Makefile").read_text()
    assert "DEPLOY_CONFIG ?= config/default\n" in makefile
    assert "kustomize $(DEPLOY_CONFIG)" in makefile
    assert "-k $(DEPLOY_CONFIG)" in makefile
