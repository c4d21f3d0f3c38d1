"""`run --as system:serviceaccount:NS:NAME` against a real API server: the
local operator meets the deployed identity's RBAC, its run's 403 becomes a
Failure saying what to allow and where, and credentials that may not
impersonate stop the operator at start with a message saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from test_token_auth import kubeconfig_for

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests, schemaless_crd
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import condition_of, wait_for_condition

pytestmark = pytest.mark.cluster

GROUP, VERSION, KIND, PLURAL = "rbac.test.ansible-operator.io", "v1alpha1", "WebApp", "webapps"
ACCOUNT = "webapp-operator"
ROLE_TASKS = """\
- name: Read the Deployment first
  kubernetes.core.k8s_info:
    api_version: apps/v1
    kind: Deployment
    namespace: "{{ ansible_operator_meta.namespace }}"
    name: "{{ ansible_operator_meta.name }}"
- name: Create the Deployment
  kubernetes.core.k8s:
    definition:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: "{{ ansible_operator_meta.name }}"
        namespace: "{{ ansible_operator_meta.namespace }}"
      spec:
        selector: {matchLabels: {app: web}}
        template:
          metadata: {labels: {app: web}}
          spec: {containers: [{name: web, image: nginx}]}
"""


def operator_rbac(namespace: str) -> str:
    """What the operator itself needs in `namespace` (its kind, its status,
    Events), and reads of Deployments: not their creation, which its role does."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ACCOUNT, "namespace": namespace},
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": [PLURAL, f"{PLURAL}/status"],
                "verbs": ["get", "list", "watch", "update", "patch"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "get"]},
            {
                "apiGroups": ["apps"],
                "resources": ["deployments"],
                "verbs": ["get", "list", "watch"],
            },
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
def project(kube_api: client.ApiClient, kube_namespace: str, tmp_path: Path) -> Path:
    """A project whose role creates a Deployment, and its operator's service
    account in `kube_namespace`, allowed everything but that."""
    apply_manifests(kube_api, yaml.safe_dump(schemaless_crd(GROUP, KIND, PLURAL, version=VERSION)))
    apply_manifests(kube_api, operator_rbac(kube_namespace))
    tasks = tmp_path / "project" / "roles" / "webapp" / "tasks" / "main.yml"
    tasks.parent.mkdir(parents=True)
    tasks.write_text(ROLE_TASKS)
    watches = [{"version": VERSION, "group": GROUP, "kind": KIND, "role": "webapp"}]
    (tmp_path / "project" / "watches.yaml").write_text(yaml.safe_dump(watches))
    return tmp_path / "project"


def test_a_local_run_as_the_service_account_fails_saying_what_to_allow_and_where(
    project: Path, kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    identity = f"system:serviceaccount:{kube_namespace}:{ACCOUNT}"
    operator = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,  # an admin's: only --as stands between it and the RBAC
        log_path=project.parent / "operator.log",
        args=["--as", identity],
        env={"WATCH_NAMESPACE": kube_namespace},
    )
    try:
        operator.start(timeout=120)
        groups = f"system:serviceaccounts,system:serviceaccounts:{kube_namespace}"
        # Said at start, before it was ready: what the operator's user reads.
        assert f"acting as user={identity} groups={groups},system:authenticated" in operator.logs
        webapp = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": "web"}}
        client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, PLURAL, webapp | {"spec": {}}
        )
        failed = wait_for_condition(
            kube_api, GROUP, VERSION, PLURAL, kube_namespace, "web", "Failure", timeout=120
        )
    finally:
        operator.stop()
    line = ROLE_TASKS.splitlines().index("- name: Create the Deployment") + 1
    assert condition_of(failed, "Failure")["message"] == (
        f'task "Create the Deployment" (roles/webapp/tasks/main.yml:{line}) failed: '
        f"forbidden: the operator's identity {identity} may not create apps/deployments "
        f'in namespace {kube_namespace}; add the rule {{apiGroups: ["apps"], '
        "resources: [deployments], verbs: [create]} to config/rbac/role.yaml "
        "(`ansible-operator check --fix-rbac` adds those it can see in the roles)"
    )


def test_credentials_that_may_not_impersonate_stop_the_operator_at_start(
    project: Path, kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    token = (
        client.CoreV1Api(kube_api)
        .create_namespaced_service_account_token(
            ACCOUNT,
            kube_namespace,
            client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
        )
        .status.token
    )
    kubeconfig = kubeconfig_for(kube_cluster, {"token": token}, project.parent / "kubeconfig")
    other = f"system:serviceaccount:{kube_namespace}:default"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "ansible_operator.cli", "run", "--as", other),
            *("--health-probe-bind-address=0", "--metrics-bind-address=0", "--proxy-port=0"),
        ],
        cwd=project,
        env={**os.environ, "KUBECONFIG": str(kubeconfig), "WATCH_NAMESPACE": kube_namespace},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"ansible-operator: --as {other}: the credentials of {kubeconfig} may not act as " in (
        result.stderr
    )
    # The API server's reason: `cannot impersonate resource "serviceaccounts"`, or
    # from 1.35 on (constrained impersonation) `cannot impersonate-on:serviceaccount:...`.
    assert "cannot impersonate" in result.stderr
    assert "use credentials allowed to impersonate it" in result.stderr


def test_reconcile_as_the_service_account_applies_as_you_and_runs_as_it(
    project: Path, kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    identity = f"system:serviceaccount:{kube_namespace}:{ACCOUNT}"
    webapp = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": "once"}}
    (project / "webapp.yaml").write_text(yaml.safe_dump(webapp | {"spec": {}}))
    result = subprocess.run(
        [
            *(sys.executable, "-m", "ansible_operator.cli", "reconcile"),
            *("-f", "webapp.yaml", "--create", "-n", kube_namespace, "--as", identity),
        ],
        cwd=project,
        env={**os.environ, "KUBECONFIG": str(kube_cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    # Created by you (the service account may not create WebApps), reconciled by it.
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert (
        f"forbidden: the operator's identity {identity} may not create apps/deployments "
        f'in namespace {kube_namespace}; add the rule {{apiGroups: ["apps"], '
        "resources: [deployments], verbs: [create]} to config/rbac/role.yaml"
    ) in result.stdout
