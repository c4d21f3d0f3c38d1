"""Every 403 the operator meets in the cluster explained where the object's
author looks (its conditions and Events), with the rule to add to
config/rbac/role.yaml: a Secret task under `no_log: true` that RBAC refuses,
and a dependent kind the operator may create but not watch.

One operator, acting as a service account (`--as`) that lacks exactly those.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests, schemaless_crd
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import config_map, events_for
from ansible_operator.testing.waiting import condition_of, eventually, wait_for_condition

pytestmark = pytest.mark.cluster

GROUP, VERSION = "rbacexplained.test.ansible-operator.io", "v1alpha1"
KINDS = {"Vault": "vaults", "Board": "boards"}
ACCOUNT = "explained-operator"
VAULT_TASKS = """\
- name: Keep the password
  no_log: true
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Secret
      metadata:
        name: "{{ ansible_operator_meta.name }}-password"
        namespace: "{{ ansible_operator_meta.namespace }}"
      stringData:
        password: hunter2-not-shown
"""
BOARD_TASKS = """\
- name: Post the board
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-board"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        message: posted
"""


def operator_rbac(namespace: str) -> str:
    """Its kinds, their status and Events; ConfigMaps it may write but not list or
    watch; no Secrets at all."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ACCOUNT, "namespace": namespace},
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": [*KINDS.values(), *(f"{plural}/status" for plural in KINDS.values())],
                "verbs": ["get", "list", "watch", "update", "patch"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "get"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]},
        ],
    }
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": ACCOUNT, "namespace": namespace},
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ACCOUNT, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}],
    }
    return yaml.safe_dump_all([account, role, binding])


@pytest.fixture
def operator(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str, tmp_path: Path
) -> OperatorProcess:
    for kind, plural in KINDS.items():
        apply_manifests(
            kube_api, yaml.safe_dump(schemaless_crd(GROUP, kind, plural, version=VERSION))
        )
    apply_manifests(kube_api, operator_rbac(kube_namespace))
    project = tmp_path / "project"
    for role, tasks in (("vault", VAULT_TASKS), ("board", BOARD_TASKS)):
        (project / "roles" / role / "tasks").mkdir(parents=True)
        (project / "roles" / role / "tasks" / "main.yml").write_text(tasks)
    watches = [
        {"version": VERSION, "group": GROUP, "kind": kind, "role": kind.lower()} for kind in KINDS
    ]
    (project / "watches.yaml").write_text(yaml.safe_dump(watches))
    return OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=["--as", f"system:serviceaccount:{kube_namespace}:{ACCOUNT}"],
        env={"WATCH_NAMESPACE": kube_namespace},
        cwd=project,
    )


def create(api: client.ApiClient, namespace: str, kind: str, name: str) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}}
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, KINDS[kind], body | {"spec": {}}
    )


def test_a_no_log_403_and_an_unwatchable_dependent_say_what_to_add(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    identity = f"system:serviceaccount:{kube_namespace}:{ACCOUNT}"
    try:
        operator.start(timeout=120)
        create(kube_api, kube_namespace, "Vault", "keeper")
        create(kube_api, kube_namespace, "Board", "board")
        vault = wait_for_condition(
            kube_api, GROUP, VERSION, "vaults", kube_namespace, "keeper", "Failure", timeout=120
        )
        board = wait_for_condition(
            kube_api,
            GROUP,
            VERSION,
            "boards",
            kube_namespace,
            "board",
            "DependentsWatched",
            "False",
            timeout=120,
            predicate=lambda obj: condition_of(obj, "Successful")["status"] == "True",
        )
    finally:
        operator.stop()

    # The no_log task: what was refused and the rule, from the proxy's record; no value.
    # (kubernetes.core reads the Secret before it creates it: `get` is refused first.)
    message = condition_of(vault, "Failure")["message"]
    assert message == (
        'task "Keep the password" (roles/vault/tasks/main.yml:1) failed: forbidden: '
        f"the operator's identity {identity} may not get secrets in namespace "
        f'{kube_namespace}; add the rule {{apiGroups: [""], resources: [secrets], '
        "verbs: [get]} to config/rbac/role.yaml (`ansible-operator check --fix-rbac` "
        "adds those it can see in the roles) (its output is hidden by no_log; the "
        "operator's API proxy saw this)"
    )
    assert "hunter2" not in message

    # The dependent: made, the run Successful, and the watch it lacks said on the owner.
    assert config_map(kube_api, kube_namespace, "board-board") == {"message": "posted"}
    assert condition_of(board, "Successful")["status"] == "True"
    refused = condition_of(board, "DependentsWatched")
    assert refused["reason"] == "Forbidden"
    assert refused["message"] == (
        "the operator cannot watch what this object's runs made, so a change to them goes "
        f"unseen: forbidden: the operator's identity {identity} may not list configmaps in "
        f'namespace {kube_namespace}; add the rule {{apiGroups: [""], resources: [configmaps], '
        "verbs: [list]} to config/rbac/role.yaml (`ansible-operator check --fix-rbac` adds "
        "those it can see in the roles)"
    )
    warned = eventually(
        lambda: [
            e
            for e in events_for(kube_api, kube_namespace, "board")
            if e.reason == "DependentWatchForbidden"
        ],
        what="a DependentWatchForbidden Event on the Board",
    )
    assert warned[0].type == "Warning"
    assert warned[0].message == refused["message"]
