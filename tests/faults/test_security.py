"""Security: run files holding credentials are private and removed; no_log
values and Secret data never reach the operator's log or Events; the
samples' RBAC is least privilege, and a write outside it is a Failure naming
the verb and the resource. (The proxy's 401s: tests/integration/test_proxy.py.)"""

from __future__ import annotations

import base64
import re
import stat
from pathlib import Path

import pytest
import yaml
from faultops import StartOperator, converged, create, failed
from kubernetes import client

from ansible_operator.cluster import LocalControlPlane
from ansible_operator.testing.manifests import apply_manifests, documents
from ansible_operator.testing.reading import events_for
from ansible_operator.testing.waiting import eventually, wait_for_condition
from holds import Hold

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
SECRET_FILES = ("kubeconfig", "env/extravars", "env/cluster_vars", "env/envvars")


def test_run_files_with_credentials_are_private_and_removed_after_the_run(
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    start_operator(args=[f"--runner-dir={runs}"])
    hold = Hold(tmp_path)
    create(kube_api, kube_namespace, "Work", "private", value="p", hold=str(hold.path))
    hold.wait_reached()
    run_dir = runs / "faults.ansible-operator.io" / "v1alpha1" / "Work" / kube_namespace / "private"
    # The run's inputs are in a directory of its own, with a name that cannot
    # be guessed, in a directory its owner may not list (the test may).
    private = runs / ".private"
    assert stat.S_IMODE(private.stat().st_mode) == 0o300
    private.chmod(0o700)
    [inputs] = list(private.iterdir())
    for name in SECRET_FILES:
        mode = stat.S_IMODE((inputs / name).stat().st_mode)
        assert mode == 0o600, f"{name} is {oct(mode)}"
    for directory in (inputs, inputs / "env", run_dir, run_dir.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    hold.release()
    converged(kube_api, kube_namespace, "Work", "private")
    for name in SECRET_FILES:
        assert not (inputs / name).exists(), f"{name} outlived the run"
    assert list((run_dir / "artifacts").iterdir()), "the run's artifacts are kept"


def test_no_log_values_and_secret_data_never_reach_logs_or_events(
    start_operator: StartOperator, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    password = "hunter2-do-not-print-me"
    token = "s3cr3t-token-in-a-secret"
    client.CoreV1Api(kube_api).create_namespaced_secret(
        kube_namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="creds"), string_data={"token": token}),
    )
    # Everything Ansible emits is logged, Secret reads included.
    operator = start_operator(args=["--ansible-log-events=everything", "--ansible-verbosity=4"])
    create(
        kube_api,
        kube_namespace,
        "Secretive",
        "keeper",
        password=password,
        secret_name="creds",
        fail_loudly=True,
    )
    # The run's log lines come before the status it ends with: its Failure means the
    # log holds the whole run.
    failure = failed(kube_api, kube_namespace, "Secretive", "keeper")
    assert "no_log" in failure["message"]  # Ansible's own "output has been hidden"
    assert "name=keeper task='Fail with the password" in operator.logs
    encoded = base64.b64encode(token.encode()).decode()
    events = " ".join(e.message or "" for e in events_for(kube_api, kube_namespace, "keeper"))
    for leaked in (password, token, encoded):
        assert leaked not in operator.logs
        assert leaked not in events
        assert leaked not in failure["message"]
    assert "name=keeper task='Read the Secret'" in operator.logs  # the reads were logged


@pytest.fixture
def samples_user(
    control_plane: LocalControlPlane, kube_api: client.ApiClient, kube_namespace: str
) -> Path:
    """A user with exactly the cluster-wide permissions config/rbac/ gives the samples'
    operator (the samples' ClusterRole and the webhooks' one), and a kubeconfig for it."""
    for crd in sorted((ROOT / "config" / "crd" / "bases").glob("*.yaml")):
        apply_manifests(kube_api, crd)
    user = f"samples-{kube_namespace}"
    for manifest in ("role.yaml", "webhook.yaml"):
        for role in documents(ROOT / "config" / "rbac" / manifest):
            if role["kind"] != "ClusterRole":
                continue
            apply_manifests(kube_api, yaml.safe_dump(role))
            name = role["metadata"]["name"]
            client.RbacAuthorizationV1Api(kube_api).create_cluster_role_binding(
                client.V1ClusterRoleBinding(
                    metadata=client.V1ObjectMeta(name=f"{user}-{name}"[:253]),
                    role_ref=client.V1RoleRef(
                        api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=name
                    ),
                    subjects=[
                        client.RbacV1Subject(
                            kind="User", name=user, api_group="rbac.authorization.k8s.io"
                        )
                    ],
                )
            )
    return control_plane.user_kubeconfig(user)


INTRUDER_TASKS = """
- name: Create a ClusterRole
  kubernetes.core.k8s:
    state: present
    definition:
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      metadata:
        name: "intruder-{{ ansible_operator_meta.namespace }}"
      rules: []
"""


def test_samples_run_with_their_rbac_and_a_write_outside_it_is_a_clear_failure(
    samples_user: Path,
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    memcached = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "cache"},
        "spec": {"size": 2},
    }
    # The samples, with nothing but their ClusterRole.
    start_operator(watches=ROOT / "watches.yaml", kubeconfig=samples_user)
    custom.create_namespaced_custom_object(
        "cache.example.com", "v1alpha1", kube_namespace, "memcacheds", memcached
    )
    wait_for_condition(
        kube_api,
        "cache.example.com",
        "v1alpha1",
        "memcacheds",
        kube_namespace,
        "cache",
        "Successful",
    )
    deployment = client.AppsV1Api(kube_api).read_namespaced_deployment("cache", kube_namespace)
    assert deployment.spec.replicas == 2

    # A role that writes what that ClusterRole does not allow.
    project = tmp_path / "intruder"
    (project / "roles" / "intruder" / "tasks").mkdir(parents=True)
    (project / "roles" / "intruder" / "tasks" / "main.yml").write_text(INTRUDER_TASKS)
    (project / "watches.yaml").write_text(
        "- {version: v1alpha1, group: cache.example.com, kind: Memcached, role: intruder}\n"
    )
    other = f"{kube_namespace}-x"[:63]
    client.CoreV1Api(kube_api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=other))
    )
    try:
        start_operator(
            watches=project / "watches.yaml",
            kubeconfig=samples_user,
            env={"WATCH_NAMESPACE": other},
        )
        custom.create_namespaced_custom_object(
            "cache.example.com", "v1alpha1", other, "memcacheds", memcached
        )
        obj = wait_for_condition(
            kube_api, "cache.example.com", "v1alpha1", "memcacheds", other, "cache", "Failure"
        )
        message = next(c for c in obj["status"]["conditions"] if c["type"] == "Failure")["message"]
        assert "forbidden" in message.lower(), message
        # The verb (the module reads before it creates), the resource, the file to change.
        refused = r"may not (get|create) rbac\.authorization\.k8s\.io/clusterroles at the cluster"
        assert re.search(refused, message), message
        assert "config/rbac/role.yaml" in message, message
        eventually(
            lambda: "Failed" in {e.reason for e in events_for(kube_api, other, "cache")},
            timeout=30,
            what="a Failed Event",
        )
    finally:
        client.CoreV1Api(kube_api).delete_namespace(other)
