"""`ansible-operator reconcile`: one object's reconcile, run by hand, with
Ansible's own output live and the resulting conditions; the object itself left
alone unless --write-status, never created unless --create, a preview
(--check) that cannot write, and API errors as one line."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from greetings import GROUP, OPERATOR, VERSION
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.reading import config_map, events_for
from ansible_operator.testing.waiting import condition_of, get_custom

pytestmark = pytest.mark.cluster


def reconcile(
    cluster: Cluster, *args: str, obj: dict | None = None, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ansible_operator.cli", "reconcile", *args]
    if obj is not None:
        path = tmp_path / "object.yaml"
        path.write_text(yaml.safe_dump(obj))
        command += ["-f", str(path)]
    return subprocess.run(
        command,
        cwd=OPERATOR,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def greeting(name: str, **spec: str) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Greeting",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_reconcile_a_file_shows_tasks_live_and_the_conditions_it_would_write(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    result = reconcile(
        kube_cluster,
        "--create",
        "-n",
        kube_namespace,
        obj=greeting("by-hand", greetingMessage="hi"),
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TASK [greeting : Write the greeting ConfigMap]" in result.stdout
    assert "PLAY RECAP" in result.stdout
    assert "conditions this run would write (not written: pass --write-status" in result.stdout
    assert "Successful         True" in result.stdout
    assert "would write finalizer added: test.ansible-operator.io/cleanup" in result.stdout
    assert "reconcile of Greeting by-hand succeeded" in result.stdout
    # What the role does is done; the object (an operator may be reconciling it) is left alone.
    assert config_map(kube_api, kube_namespace, "by-hand-greeting")["message"] == "hi!"
    left = get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "by-hand")
    assert "conditions" not in (left.get("status") or {})
    assert not left["metadata"].get("finalizers")


def test_a_file_naming_an_object_not_there_creates_nothing(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    result = reconcile(
        kube_cluster, "-n", kube_namespace, obj=greeting("absent"), tmp_path=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ansible-operator: Greeting absent in namespace {kube_namespace} does not exist; "
        "`reconcile -f` never creates what you did not ask it to: create it (kubectl apply "
        f"-f {tmp_path / 'object.yaml'}) or pass --create"
    ]
    assert get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "absent") is None


def test_a_namespace_not_there_is_one_line(
    kube_cluster: Cluster, test_crds: None, tmp_path: Path
) -> None:
    result = reconcile(
        kube_cluster, "--create", "-n", "no-such-ns", obj=greeting("x"), tmp_path=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["ansible-operator: namespace no-such-ns does not exist"]
    assert "Traceback" not in result.stdout + result.stderr


def test_a_failing_reconcile_exits_non_zero_with_the_task_message(
    kube_cluster: Cluster, test_crds: None, kube_namespace: str, tmp_path: Path
) -> None:
    result = reconcile(
        kube_cluster,
        "--create",
        "--write-status",
        "-n",
        kube_namespace,
        obj=greeting("sad", failWith="disk full"),
        tmp_path=tmp_path,
    )
    assert result.returncode == 1
    assert 'FAILED: task "Fail when asked to" (' in result.stdout  # its file:line, then
    assert ") failed: disk full" in result.stdout
    assert "Failure            True" in result.stdout
    # Said by the run, the conditions and the verdict: not again by the operator's log line.
    assert "reconcile failed kind=Greeting" not in result.stderr, result.stderr


def test_a_preview_writes_nothing_and_shows_the_change_without_bookkeeping(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    custom = client.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "greetings", greeting("dry", greetingMessage="x")
    )
    made = reconcile(kube_cluster, "Greeting/dry", "-n", kube_namespace, tmp_path=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    before = get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "dry")

    result = reconcile(
        kube_cluster,
        "--check",
        "-n",
        kube_namespace,
        obj=greeting("dry", greetingMessage="y"),
        tmp_path=tmp_path,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "(preview: nothing was written)" in result.stdout
    assert "-  message: x!\n+  message: y!" in result.stdout
    assert "managedFields" not in result.stdout and "resourceVersion" not in result.stdout
    assert config_map(kube_api, kube_namespace, "dry-greeting")["message"] == "x!"
    after = get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "dry")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_reconcile_an_object_already_in_the_cluster_by_kind_and_name(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "greetings", greeting("there", greetingMessage="yo")
    )
    result = reconcile(
        kube_cluster, "Greeting/there", "-n", kube_namespace, "--write-status", tmp_path=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert config_map(kube_api, kube_namespace, "there-greeting")["message"] == "yo!"
    written = get_custom(kube_api, GROUP, VERSION, "greetings", kube_namespace, "there")
    assert condition_of(written, "Successful")["status"] == "True"


def test_unknown_kind_is_a_clear_error(kube_cluster: Cluster, tmp_path: Path) -> None:
    result = reconcile(kube_cluster, "Widget/x", tmp_path=tmp_path)
    assert result.returncode == 2
    assert "Widget" in result.stderr and "Greeting" in result.stderr


@pytest.mark.skipif(
    tuple(int(p) for p in version("ansible-core").split(".")[:2]) < (2, 19),
    reason="ansible-core 2.18 renders the number as text already",
)
def test_a_number_where_kubernetes_wants_a_string_is_sent_as_218s_with_a_warning(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    """ansible-core 2.19+ renders `{{ count | int + 1 }}` as a number, which the API
    server refuses in a label and in ConfigMap data: the role keeps working."""
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        GROUP, VERSION, kube_namespace, "greetings", greeting("counted", count="2")
    )
    result = reconcile(
        kube_cluster, "Greeting/counted", "-n", kube_namespace, "--write-status", tmp_path=tmp_path
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    made = client.CoreV1Api(kube_api).read_namespaced_config_map("counted-count", kube_namespace)
    assert (made.data, made.metadata.labels) == ({"count": "3"}, {"count": "3"})
    warned = [e for e in events_for(kube_api, kube_namespace, "counted") if e.type == "Warning"]
    assert sorted(e.reason for e in warned) == ["StringFieldCoerced"] * 2
    assert any(
        e.message.startswith(
            'task "Count the greetings, as a role written for ansible-core 2.18 does" '
            "(roles/greeting/tasks/main.yml:"
        )
        and f"ConfigMap {kube_namespace}/counted-count data.count was the number 3" in e.message
        and "add `| string` to it" in e.message
        for e in warned
    )


def test_a_reconcile_forked_from_a_warm_runner_made_for_it_does_the_same(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    result = reconcile(
        kube_cluster,
        "--create",
        "--runner-mode",
        "warm",
        "-n",
        kube_namespace,
        obj=greeting("warm", greetingMessage="hot"),
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TASK [greeting : Write the greeting ConfigMap]" in result.stdout
    assert "reconcile of Greeting warm succeeded" in result.stdout
    assert config_map(kube_api, kube_namespace, "warm-greeting")["message"] == "hot!"
