"""A custom object's author cannot run code in the operator through Jinja.

The attack: someone allowed to create a Greeting in their namespace puts
`{{ lookup('pipe', ...) }}` (run a command as the operator) and a
`kubernetes.core.k8s` lookup (read a Secret of another namespace) in its spec
and annotations. Every variable the object reaches the role by must carry
these strings as data, in both runner modes; only an explicit
`markUnsafe: false` brings back Operator SDK's behaviour, with a warning.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import config_map
from ansible_operator.testing.waiting import wait_for_condition

pytestmark = pytest.mark.cluster

OPERATOR = Path(__file__).resolve().parent.parent / "operator"
GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"
STOLEN = "s3cret-from-another-namespace"


@pytest.fixture
def victim_secret(kube_api: client.ApiClient) -> Iterator[str]:
    """A Secret in a namespace the attacker has no access to."""
    core = client.CoreV1Api(kube_api)
    namespace = f"victim-{os.urandom(3).hex()}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="db"), string_data={"password": STOLEN}),
    )
    yield namespace
    core.delete_namespace(namespace)


def exploits(marker: Path, victim_namespace: str) -> tuple[str, str]:
    run_a_command = f"{{{{ lookup('pipe', 'touch {marker}') }}}}"
    read_a_secret = (
        "{{ lookup('kubernetes.core.k8s', kind='Secret', namespace='"
        + victim_namespace
        + "', resource_name='db') | to_json }}"
    )
    return run_a_command, read_a_secret


def malicious_greeting(name: str, run_a_command: str, read_a_secret: str) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Greeting",
        "metadata": {"name": name, "annotations": {"example.com/echo": run_a_command}},
        "spec": {
            "echo": run_a_command,
            "echoNested": {"deeperValue": read_a_secret},
            "echoList": [run_a_command],
        },
    }


def assert_kept_as_data(
    kube_api: client.ApiClient, namespace: str, name: str, marker: Path, exploits: tuple[str, str]
) -> None:
    run_a_command, read_a_secret = exploits
    echoed = config_map(kube_api, namespace, f"{name}-echo")
    assert echoed is not None, "the role did not run to its echo task"
    assert not marker.exists(), "a spec value ran a command in the operator"
    assert echoed["spec_var"] == run_a_command
    assert echoed["list_var"] == run_a_command
    assert echoed["object_var"] == run_a_command
    assert echoed["annotation"] == run_a_command
    assert echoed["nested_var"] == read_a_secret
    assert echoed["raw_spec_var"] == read_a_secret
    assert STOLEN not in str(echoed)
    assert base64.b64encode(STOLEN.encode()).decode() not in str(echoed)


@pytest.mark.parametrize("runner_mode", ["warm", "reference"])
def test_jinja_in_a_spec_is_data_in_every_variable(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    victim_secret: str,
    tmp_path: Path,
    runner_mode: str,
) -> None:
    marker = tmp_path / "pwned"
    attack = exploits(marker, victim_secret)
    operator = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=[f"--runner-mode={runner_mode}"],
        env={"WATCH_NAMESPACE": kube_namespace},
    ).start()
    try:
        client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, "greetings", malicious_greeting("evil", *attack)
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "evil", "Successful"
        )
        assert_kept_as_data(kube_api, kube_namespace, "evil", marker, attack)
        assert "markUnsafe: false" not in operator.logs
    finally:
        operator.stop()


def test_mark_unsafe_false_keeps_the_reference_behaviour_and_warns(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    victim_secret: str,
    tmp_path: Path,
) -> None:
    watches = yaml.safe_load((OPERATOR / "watches.yaml").read_text())
    for watch in watches:
        if watch["kind"] == "Greeting":
            watch["markUnsafe"] = False
    watches_file = tmp_path / "watches.yaml"
    watches_file.write_text(yaml.safe_dump(watches))
    marker = tmp_path / "pwned"
    attack = exploits(marker, victim_secret)
    obj = malicious_greeting("trusting", *attack)
    obj["metadata"]["namespace"] = kube_namespace
    object_file = tmp_path / "object.yaml"
    object_file.write_text(yaml.safe_dump(obj))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ansible_operator.cli",
            "reconcile",
            f"--watches-file={watches_file}",
            "-f",
            str(object_file),
            "--create",
        ],
        cwd=OPERATOR,
        env={**os.environ, "KUBECONFIG": str(kube_cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert "markUnsafe: false" in result.stderr and "Greeting" in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert marker.exists(), "markUnsafe: false should template the spec, as Operator SDK does"
    echoed = config_map(kube_api, kube_namespace, "trusting-echo")
    assert echoed is not None
    assert base64.b64encode(STOLEN.encode()).decode() in echoed["nested_var"]
