"""The operator authenticated by a ServiceAccount token, as it is in a pod and
with the kubeconfigs EKS, GKE, OIDC and `oc login` write: a `token:`, or an
exec plugin that prints one. The real operator reconciles the Memcached sample
with only what config/rbac/ grants, and the API server says who we are."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.kube.config import load_config
from ansible_operator.kube.types import Resource
from ansible_operator.testing.manifests import apply_manifests, documents
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually, wait_for_condition

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ACCOUNT = "ansible-operator"  # as config/rbac/ names it
GROUP, VERSION, PLURAL = "cache.example.com", "v1alpha1", "memcacheds"
NODES = Resource("", "v1", "Node", "nodes", False)
NAMESPACES = Resource("", "v1", "Namespace", "namespaces", False)
CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)

PLUGIN = """\
import json, pathlib
here = pathlib.Path(__file__).parent
with open(here / "runs.log", "a") as runs:
    runs.write("run\\n")
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {
        "token": (here / "token.txt").read_text().strip(),
        "expirationTimestamp": (here / "expiry.txt").read_text().strip(),
    },
}))
"""


@pytest.fixture
def operator_token(kube_api: client.ApiClient, kube_namespace: str) -> Iterator[str]:
    """config/rbac/ applied for a ServiceAccount in this test's namespace (the
    samples' ClusterRole through a ClusterRoleBinding, the leader-election
    Role), and a token for it from the TokenRequest API."""
    binding = f"ansible-operator-samples-{kube_namespace}"
    manifests: list[dict[str, Any]] = []
    for name in ("role.yaml", "leader_election.yaml"):
        manifests += documents(ROOT / "config" / "rbac" / name)
    for doc in manifests:
        metadata = doc["metadata"]
        if doc["kind"] == "ClusterRoleBinding":
            metadata["name"] = binding  # one per test: deleted afterwards
        elif doc["kind"] != "ClusterRole":
            metadata["namespace"] = kube_namespace
        for subject in doc.get("subjects") or []:
            subject["namespace"] = kube_namespace
    apply_manifests(kube_api, yaml.safe_dump_all(manifests))
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    answer = client.CoreV1Api(kube_api).create_namespaced_service_account_token(
        SERVICE_ACCOUNT, kube_namespace, request
    )
    yield answer.status.token
    client.RbacAuthorizationV1Api(kube_api).delete_cluster_role_binding(binding)


def kubeconfig_for(kube_cluster: Cluster, user: dict[str, Any], path: Path) -> Path:
    """The test cluster's server and CA, with `user` (no client certificate)."""
    admin = yaml.safe_load(kube_cluster.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster["cluster"]}],
        "users": [{"name": SERVICE_ACCOUNT, "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": SERVICE_ACCOUNT}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def exec_user(directory: Path, token: str) -> dict[str, Any]:
    """A plugin as `aws eks get-token` is one: prints an ExecCredential."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "plugin.py").write_text(PLUGIN)
    (directory / "token.txt").write_text(token)
    expiry = datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(hours=1)
    (directory / "expiry.txt").write_text(expiry.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(directory / "plugin.py")],
            "interactiveMode": "Never",
        }
    }


def plugin_runs(directory: Path) -> int:
    return len((directory / "runs.log").read_text().splitlines())


def memcached_watches(path: Path) -> Path:
    """The Memcached entry of the repo's watches.yaml, alone."""
    roles = ROOT / "roles"
    path.write_text(
        yaml.safe_dump(
            [
                {
                    "version": VERSION,
                    "group": GROUP,
                    "kind": "Memcached",
                    "role": str(roles / "memcached"),
                    "watchDependentStatus": True,
                    "finalizer": {
                        "name": "cache.example.com/finalizer",
                        "role": str(roles / "memcached_finalizer"),
                    },
                }
            ]
        )
    )
    return path


@pytest.mark.parametrize("kind", ["token", "exec"])
def test_operator_reconciles_the_sample_as_its_service_account(
    kind: str,
    kube_cluster: Cluster,
    kube_api: client.ApiClient,
    kube_namespace: str,
    operator_token: str,
    tmp_path: Path,
) -> None:
    apply_manifests(
        kube_api, ROOT / "config" / "crd" / "bases" / "cache.example.com_memcacheds.yaml"
    )
    user = (
        {"token": operator_token}
        if kind == "token"
        else exec_user(tmp_path / "plugin", operator_token)
    )
    kubeconfig = kubeconfig_for(kube_cluster, user, tmp_path / "kubeconfig")
    operator = OperatorProcess(
        memcached_watches(tmp_path / "watches.yaml"),
        kubeconfig,
        log_path=tmp_path / "operator.log",
        args=["--leader-elect", f"--leader-election-namespace={kube_namespace}"],
        env={"WATCH_NAMESPACE": kube_namespace},
        cwd=ROOT,
    )
    try:
        operator.start(timeout=120)
        sample = documents(ROOT / "config" / "samples" / "cache_v1alpha1_memcached.yaml")[0]
        client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, PLURAL, sample
        )
        name = sample["metadata"]["name"]
        wait_for_condition(
            kube_api, GROUP, VERSION, PLURAL, kube_namespace, name, "Successful", timeout=120
        )
        deployment = client.AppsV1Api(kube_api).read_namespaced_deployment(name, kube_namespace)
        assert deployment.spec.replicas == sample["spec"]["size"]
        assert [owner.name for owner in deployment.metadata.owner_references] == [name]
        # Leader election went through the token too: the Lease is held.
        lease = eventually(
            lambda: client.CoordinationV1Api(kube_api).list_namespaced_lease(kube_namespace).items,
            what="leader-election Lease",
        )
        assert lease[0].spec.holder_identity
    finally:
        operator.stop()
    assert "system:anonymous" not in operator.logs
    if kind == "exec":
        assert plugin_runs(tmp_path / "plugin") >= 1


async def test_token_is_the_service_account_not_an_admin(
    kube_cluster: Cluster, kube_namespace: str, operator_token: str, tmp_path: Path
) -> None:
    config = load_config(kubeconfig_for(kube_cluster, {"token": operator_token}, tmp_path / "kc"))
    async with ApiClient(config) as api:
        allowed = await api.list(CONFIGMAPS, kube_namespace)
        assert allowed["kind"] == "ConfigMapList"
        with pytest.raises(ApiError) as refused:
            await api.list(NODES)  # not in the samples' ClusterRole
    assert refused.value.status == 403
    assert f"system:serviceaccount:{kube_namespace}:{SERVICE_ACCOUNT}" in refused.value.message


async def test_a_401_reruns_the_exec_plugin_once_and_retries(
    kube_cluster: Cluster, kube_namespace: str, operator_token: str, tmp_path: Path
) -> None:
    """A credential revoked before its expiry (or a plugin's stale cache): the
    API server's 401 makes the client re-run the plugin and send again."""
    plugins = {verb: tmp_path / verb for verb in ("get", "watch")}
    configs = {
        verb: load_config(
            kubeconfig_for(
                kube_cluster,
                exec_user(directory, "revoked-token"),
                directory / "kubeconfig",
            )
        )
        for verb, directory in plugins.items()
    }
    for directory in plugins.values():
        (directory / "token.txt").write_text(operator_token)  # what a re-run now prints

    async with ApiClient(configs["get"]) as api:
        namespace = await api.get(NAMESPACES, kube_namespace)
        await api.create(CONFIGMAPS, {"metadata": {"name": "seen"}}, kube_namespace)
    assert namespace["metadata"]["name"] == kube_namespace
    assert plugin_runs(plugins["get"]) == 2

    async with ApiClient(configs["watch"]) as api:
        events = [event async for event in api.watch(CONFIGMAPS, kube_namespace, timeout_seconds=1)]
    added = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
    assert added == ["seen"]
    assert plugin_runs(plugins["watch"]) == 2


async def test_a_rejected_static_token_fails_with_401(
    kube_cluster: Cluster, tmp_path: Path
) -> None:
    config = load_config(kubeconfig_for(kube_cluster, {"token": "not-a-token"}, tmp_path / "kc"))
    async with ApiClient(config) as api:
        with pytest.raises(ApiError) as rejected:
            await api.list(NAMESPACES)
    assert rejected.value.status == 401
