"""A custom object's author controls data, never Ansible's own variables.

The attack: spec keys become top-level extra vars, the highest precedence, so a key
that snake-cases to `ansible_become_exe` chooses the command Ansible runs to become
another user, on any kind whose role runs a module task, and `markUnsafe` does not
help (nothing is templated). A mapping `{"__ansible_vault": <ciphertext>}` in a spec
is how Ansible's JSON writes a vaulted value: decrypted with the operator's vault
password. Both are refused before anything runs: a Failure condition and an Event
that name the key, on the test operator's kind and on the kind `create api`
scaffolds (whose CRD keeps unknown spec fields), while other objects are served.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import config_map, events_for
from ansible_operator.testing.waiting import eventually, wait_for_condition

pytestmark = pytest.mark.cluster

OPERATOR = Path(__file__).resolve().parent.parent / "operator"
GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"
VAULT_PASSWORD = "the-operators-vault-password"
VAULTED_TEXT = "decrypted-by-the-operator"


def become_attack(marker: Path) -> dict[str, Any]:
    return {
        "ansibleBecome": True,
        "ansibleBecomeUser": "nobody",
        "ansibleBecomeExe": f"id > {marker}; true",
    }


def greeting(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Greeting",
        "metadata": {"name": name},
        "spec": spec,
    }


def refusal_seen(
    api: client.ApiClient, group: str, plural: str, namespace: str, name: str, *words: str
) -> str:
    """The Failure condition's message, once its Event is there too; both name `words`."""
    failure = wait_for_condition(
        api, group, VERSION, plural, namespace, name, "Failure", timeout=120
    )
    message = next(c for c in failure["status"]["conditions"] if c["type"] == "Failure")
    assert message["reason"] == "RefusedData", message
    for word in words:
        assert word in message["message"], message

    def refusal_event() -> client.CoreV1Event | None:
        return next(
            (e for e in events_for(api, namespace, name) if e.reason == "RefusedData"), None
        )

    event = eventually(refusal_event, timeout=60, what="a RefusedData Event")
    assert event.type == "Warning"
    for word in words:
        assert word in event.message, event.message
    return message["message"]


@pytest.mark.parametrize("runner_mode", ["warm", "reference"])
def test_a_spec_key_naming_ansible_become_exe_runs_no_command(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
    runner_mode: str,
) -> None:
    marker = tmp_path / "pwned.txt"
    custom = client.CustomObjectsApi(kube_api)
    operator = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=[f"--runner-mode={runner_mode}"],
        env={"WATCH_NAMESPACE": kube_namespace},
    ).start()
    try:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, "greetings", greeting("evil", become_attack(marker))
        )
        custom.create_namespaced_custom_object(
            GROUP, VERSION, kube_namespace, "greetings", greeting("honest", {})
        )

        said = refusal_seen(
            kube_api,
            GROUP,
            "greetings",
            kube_namespace,
            "evil",
            "spec.ansibleBecomeExe",
            "'ansible_become_exe'",
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "honest", "Successful"
        )

        assert "not run" in said
        assert not marker.exists(), "a spec key ran a command as the operator"
        assert config_map(kube_api, kube_namespace, "evil-greeting") is None, "the role ran"
        assert "ansibleBecomeExe" in operator.logs and "Traceback" not in operator.logs

        # The author renames the fields: nothing is lost, the object is served.
        custom.replace_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            "greetings",
            "evil",
            {
                **custom.get_namespaced_custom_object(
                    GROUP, VERSION, kube_namespace, "greetings", "evil"
                ),
                "spec": {"greetingMessage": "renamed"},
            },
        )
        wait_for_condition(
            kube_api, GROUP, VERSION, "greetings", kube_namespace, "evil", "Successful"
        )
        assert config_map(kube_api, kube_namespace, "evil-greeting")["message"] == "renamed!"
        assert not marker.exists()
    finally:
        operator.stop()


def vault_ciphertext(text: str, password: str) -> str:
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(password.encode()))])
    return vault.encrypt(text).decode()


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def create_as_json_text(kube_api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    """Posts the object as the json module writes it, as kubectl would: the client's own
    serializer recurses twice per level and overflows Python 3.11's stack on 700 levels."""
    method, url, headers, _, _ = kube_api.param_serialize(
        "POST",
        "/apis/{group}/{version}/namespaces/{namespace}/greetings",
        path_params={"group": GROUP, "version": VERSION, "namespace": namespace},
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = kube_api.call_api(method, url, headers, body)
    response.read()
    assert response.status == 201, response.data


def test_a_vaulted_value_or_a_700_deep_spec_is_refused_not_run(
    kube_cluster: Cluster,
    test_crds: None,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    password_file = tmp_path / "vault-password"
    password_file.write_text(VAULT_PASSWORD)
    password_file.chmod(0o600)
    custom = client.CustomObjectsApi(kube_api)
    operator = OperatorProcess(
        OPERATOR / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace, "ANSIBLE_VAULT_PASSWORD_FILE": str(password_file)},
    ).start()
    try:
        tagged = {"__ansible_vault": vault_ciphertext(VAULTED_TEXT, VAULT_PASSWORD)}
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            kube_namespace,
            "greetings",
            greeting("vaulted", {"greetingMessage": tagged}),
        )

        refusal_seen(
            kube_api,
            GROUP,
            "greetings",
            kube_namespace,
            "vaulted",
            "spec.greetingMessage.__ansible_vault",
        )

        assert config_map(kube_api, kube_namespace, "vaulted-greeting") is None, "the role ran"
        assert VAULTED_TEXT not in operator.logs

        # Deeper than Python's recursion survives: once a traceback per retry, no status.
        create_as_json_text(kube_api, kube_namespace, greeting("deep", nested(700)))
        refusal_seen(
            kube_api, GROUP, "greetings", kube_namespace, "deep", "more than 100 levels deep"
        )
        assert config_map(kube_api, kube_namespace, "deep-greeting") is None, "the role ran"
        assert "Traceback" not in operator.logs and "RecursionError" not in operator.logs
    finally:
        operator.stop()


def test_the_scaffolded_kind_refuses_the_attack_too(
    kube_cluster: Cluster, kube_api: client.ApiClient, kube_namespace: str, tmp_path: Path
) -> None:
    project = tmp_path / "scaffolded"
    for args in (
        ["init", "--domain", "attack.ansible-operator.test", "--dir", str(project)],
        ["create", "api", "--group", "shop", "--version", VERSION, "--kind", "Cart",
         "--generate-role", "--dir", str(project)],
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "ansible_operator.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    (crd_file,) = (project / "config" / "crd" / "bases").glob("*.yaml")
    apply_manifests(kube_api, crd_file)
    group = "shop.attack.ansible-operator.test"
    marker = tmp_path / "pwned.txt"
    operator = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace},
    ).start()
    try:
        # The scaffolded CRD keeps unknown spec fields: the keys reach the operator.
        client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            group,
            VERSION,
            kube_namespace,
            "carts",
            {
                "apiVersion": f"{group}/{VERSION}",
                "kind": "Cart",
                "metadata": {"name": "evil"},
                "spec": {"size": 1, **become_attack(marker)},
            },
        )

        refusal_seen(kube_api, group, "carts", kube_namespace, "evil", "spec.ansibleBecomeExe")

        assert not marker.exists(), "a spec key ran a command as the operator"
    finally:
        operator.stop()
        client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(f"carts.{group}")
