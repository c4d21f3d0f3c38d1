"""operator_sdk.util's k8s_status and k8s_event against a real API server, run
by the real ansible-playbook as a role runs them (a run's kubeconfig comes in
K8S_AUTH_KUBECONFIG), with the original collection's behaviour."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from greetings import GROUP, VERSION, create, greeting
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.collections import COLLECTIONS_PATH

pytestmark = pytest.mark.cluster

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
API_VERSION = f"{GROUP}/{VERSION}"


def run_tasks(tmp_path: Path, tasks: str, env: dict[str, str]) -> None:
    playbook = tmp_path / "playbook.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks)
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "K8S_AUTH_")) and key != "KUBECONFIG"
    }
    environment.update(
        {
            "HOME": str(tmp_path / "home"),
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH),
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
            "ANSIBLE_NOCOLOR": "true",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local-tmp"),
            "ANSIBLE_REMOTE_TEMP": str(tmp_path / "remote-tmp"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
            **env,
        }
    )
    result = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            str(playbook),
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def status_of(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, "greetings", name
    )
    return obj.get("status") or {}


def test_k8s_status_merges_status_and_conditions_as_the_original(
    kube_cluster: Cluster,
    kube_api: client.ApiClient,
    kube_namespace: str,
    test_crds: None,
    tmp_path: Path,
) -> None:
    create(kube_api, kube_namespace, greeting("g"))
    target = f"api_version: {API_VERSION}\n        name: g\n        namespace: {kube_namespace}"
    tasks = f"""
    - name: first write, the kind given by its plural
      operator_sdk.util.k8s_status:
        {target}
        kind: greetings
        status: {{phase: One, nodes: [a, b], info: {{x: 1}}}}
        conditions:
          - {{type: Ready, status: "True", reason: Up, message: all up}}
          - {{type: Backup, status: Unknown}}
      register: first
    - name: the same again changes nothing
      operator_sdk.util.k8s_status:
        {target}
        kind: greeting
        status: {{phase: One, nodes: [a, b], absent: null}}
        conditions:
          - {{type: Ready, status: "True", reason: Up}}
      register: same
    - name: a condition that differs replaces the old one whole
      operator_sdk.util.k8s_status:
        {target}
        kind: Greeting
        status: {{phase: null, nodes: [a], info: {{y: 2}}}}
        conditions:
          - {{type: Backup, status: "False", reason: NoTarget}}
      register: second
    - assert:
        that:
          - first is changed
          - same is not changed
          - second is changed
          - "second.result.status.info == {{'x': 1, 'y': 2}}"
    """
    run_tasks(tmp_path, tasks, {"K8S_AUTH_KUBECONFIG": str(kube_cluster.kubeconfig)})
    status = status_of(kube_api, kube_namespace, "g")
    assert status["nodes"] == ["a"]
    assert "phase" not in status
    ready, backup = status["conditions"]
    assert {k: v for k, v in ready.items() if k != "lastTransitionTime"} == {
        "type": "Ready",
        "status": "True",
        "reason": "Up",
        "message": "all up",
    }
    assert {k: v for k, v in backup.items() if k != "lastTransitionTime"} == {
        "type": "Backup",
        "status": "False",
        "reason": "NoTarget",
    }
    assert ready["lastTransitionTime"] and backup["lastTransitionTime"]

    tasks = f"""
    - operator_sdk.util.k8s_status:
        {target}
        kind: Greeting
        replace: true
        status: {{fresh: 1}}
      register: replaced
    - operator_sdk.util.k8s_status:
        {target.replace("name: g", "name: missing")}
        kind: Greeting
        status: {{fresh: 1}}
      register: missing
      ignore_errors: true
    - assert:
        that:
          - "replaced.result[0].status == {{'fresh': 1}}"
          - missing.msg == 'Failed to retrieve requested object'
          - missing.error.status == 404
          - missing.error.reason == 'Not Found'
    """
    run_tasks(tmp_path, tasks, {"K8S_AUTH_KUBECONFIG": str(kube_cluster.kubeconfig)})
    assert status_of(kube_api, kube_namespace, "g") == {"fresh": 1}


def test_k8s_event_counts_by_reason_and_links_the_involved_object(
    kube_cluster: Cluster,
    kube_api: client.ApiClient,
    kube_namespace: str,
    test_crds: None,
    tmp_path: Path,
) -> None:
    uid = create(kube_api, kube_namespace, greeting("g"))["metadata"]["uid"]
    involved = (
        f"{{apiVersion: {API_VERSION}, kind: greetings, name: g, namespace: {kube_namespace}}}"
    )
    event = (
        f"name: about-g\n        namespace: {kube_namespace}\n        involvedObject: {involved}"
    )
    tasks = f"""
    - operator_sdk.util.k8s_event:
        {event}
        reason: Started
        message: one
    - operator_sdk.util.k8s_event:
        {event}
        reason: Started
        message: two
      register: counted
    - name: without involvedObject, with the original's state and merge_type
      operator_sdk.util.k8s_event:
        state: present
        merge_type: [strategic-merge]
        name: standalone
        namespace: {kube_namespace}
        reason: Noted
        message: about nothing in particular
    - name: appendTimestamp makes a new Event each time
      operator_sdk.util.k8s_event:
        name: stamped
        namespace: {kube_namespace}
        reason: Tick
        message: tick
        appendTimestamp: true
      loop: [1, 2]
    - assert:
        that:
          - counted.result.count == 2
          - counted.result.involvedObject.uid == '{uid}'
    """
    run_tasks(tmp_path, tasks, {"K8S_AUTH_KUBECONFIG": str(kube_cluster.kubeconfig)})
    core = client.CoreV1Api(kube_api)
    linked = core.list_namespaced_event(
        kube_namespace, field_selector=f"involvedObject.uid={uid}"
    ).items
    assert [(e.metadata.name, e.reason, e.message, e.count) for e in linked] == [
        ("about-g", "Started", "two", 2)
    ]
    first_seen = linked[0].first_timestamp

    tasks = f"""
    - name: another reason starts the count again
      operator_sdk.util.k8s_event:
        {event}
        reason: Stopped
        message: three
    """
    run_tasks(tmp_path, tasks, {"K8S_AUTH_KUBECONFIG": str(kube_cluster.kubeconfig)})
    again = core.read_namespaced_event("about-g", kube_namespace)
    assert (again.reason, again.count) == ("Stopped", 1)
    assert again.first_timestamp >= first_seen
    names = sorted(e.metadata.name for e in core.list_namespaced_event(kube_namespace).items)
    stamped = [name for name in names if name.startswith("stamped.")]
    assert len(stamped) == 2
    assert "standalone" in names


def _kubeconfig_credentials(kubeconfig: Path) -> dict[str, Any]:
    config = yaml.safe_load(kubeconfig.read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    user = next(u for u in config["users"] if u["name"] == context["context"]["user"])
    return {"cluster": cluster["cluster"], "user": user["user"]}


def test_k8s_status_connects_with_certificates_named_in_k8s_auth_variables(
    kube_cluster: Cluster,
    kube_api: client.ApiClient,
    kube_namespace: str,
    test_crds: None,
    tmp_path: Path,
) -> None:
    credentials = _kubeconfig_credentials(kube_cluster.kubeconfig)
    user, cluster = credentials["user"], credentials["cluster"]
    needed = ("client-certificate-data", "client-key-data")
    if not all(key in user for key in needed) or "certificate-authority-data" not in cluster:
        pytest.skip("the cluster's kubeconfig has no client certificate to test with")
    files = {}
    for key, name in [
        ("certificate-authority-data", "ca.crt"),
        ("client-certificate-data", "client.crt"),
        ("client-key-data", "client.key"),
    ]:
        path = tmp_path / name
        path.write_bytes(base64.b64decode((cluster | user)[key]))
        files[name] = str(path)
    create(kube_api, kube_namespace, greeting("g"))
    tasks = f"""
    - operator_sdk.util.k8s_status:
        api_version: {API_VERSION}
        kind: Greeting
        name: g
        namespace: {kube_namespace}
        status: {{connected: by-certificate}}
    - name: the same as parameters, by their own names
      operator_sdk.util.k8s_status:
        api_version: {API_VERSION}
        kind: Greeting
        name: g
        namespace: {kube_namespace}
        host: {cluster["server"]}
        ca_cert: {files["ca.crt"]}
        client_cert: {files["client.crt"]}
        client_key: {files["client.key"]}
        validate_certs: true
        status: {{connected: by-parameters}}
      environment:  # wrong on purpose: the parameters must win
        K8S_AUTH_HOST: https://127.0.0.1:1
        K8S_AUTH_SSL_CA_CERT: /nonexistent/ca.crt
        K8S_AUTH_CERT_FILE: /nonexistent/client.crt
        K8S_AUTH_CLIENT_KEY: /nonexistent/client.key
    """
    # No kubeconfig at all: only what the variables say, both spellings of each.
    env = {
        "K8S_AUTH_HOST": cluster["server"],
        "K8S_AUTH_SSL_CA_CERT": files["ca.crt"],
        "K8S_AUTH_CERT_FILE": files["client.crt"],
        "K8S_AUTH_CLIENT_KEY": files["client.key"],
        "K8S_AUTH_VALIDATE_CERTS": "true",
    }
    run_tasks(tmp_path, tasks, env)
    assert status_of(kube_api, kube_namespace, "g") == {"connected": "by-parameters"}
