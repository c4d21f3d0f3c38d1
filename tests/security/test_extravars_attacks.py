"""The attacks of issue 39 on a real operator made by `init` and `create api` (whose CRD
keeps unknown spec fields), with a role that runs a command from a spec value and
decides on a registered result.

1. A tag-like key in another case (`__ANSIBLE_VAULT`, `__AnsibleUnsafe`) beside a Jinja
   payload: on 2.21 it once made Ansible's JSON reading fail and its YAML fallback read
   every unsafe string as trusted, and the payload ran as the operator.
2. The same key holding the operator's own vault ciphertext (decrypted on 2.18).
3. A top-level spec key naming what the role registers: it once beat `register`, and
   a `fail` task deciding on the result was fooled.
4. An installed ansible-core whose loader reads `!unsafe` data otherwise (simulated: the
   tag does nothing): every object is refused, none runs.

Each is refused (a Failure condition and an Event naming the key and, for 3, the task)
or reaches the role as data; the marker file the payloads would write never appears.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import events_for
from ansible_operator.testing.waiting import eventually, wait_for_condition

pytestmark = pytest.mark.cluster

VERSION = "v1alpha1"
GROUP = "shop.attack.ansible-operator.test"
VAULT_PASSWORD = "the-operators-vault-password"
VAULTED_TEXT = "decrypted-by-the-operator"
ROLE = """
- name: Wait as long as the spec says
  ansible.builtin.command: sleep {{ sleep_for | default(0) }}

- name: Is the gate open
  ansible.builtin.command: "false"
  register: gate
  failed_when: false

- name: Stop when the gate is closed
  ansible.builtin.fail:
    msg: the gate is closed
  when: gate.rc != 0
"""
GATE_LINE = 6  # of `register: gate` in ROLE, as written to tasks/main.yml
# Ansible's `!unsafe` made a no-op: an ansible-core whose loader reads data as trusted.
TRUSTING_LOADER = """
import copy


def _trust_unsafe_tags():
    try:  # 2.19+
        from ansible._internal._yaml import _loader
        from ansible._internal._yaml._constructor import AnsibleConstructor
    except ImportError:  # 2.18
        from ansible.parsing.yaml import loader as _loader  # noqa: F401
        from ansible.parsing.yaml.constructor import AnsibleConstructor

    def construct_as_if_untagged(self, node):
        plain = copy.copy(node)
        plain.tag = self.resolve(type(node), node.value, (False, True))
        return self.construct_object(plain, deep=True)

    # The loaders keep constructor tables of their own: every class that does.
    pending = [AnsibleConstructor]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        cls.add_constructor("!unsafe", construct_as_if_untagged)


_trust_unsafe_tags()
"""


def vault_ciphertext(text: str, password: str) -> str:
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    vault = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(password.encode()))])
    return vault.encrypt(text).decode()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, kube_api: client.ApiClient) -> Iterator[Path]:
    """An operator as `init` and `create api` make it, its role replaced by ROLE."""
    project = tmp_path_factory.mktemp("attacked") / "project"
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
    (project / "roles" / "cart" / "tasks" / "main.yml").write_text(ROLE.lstrip())
    (crd_file,) = (project / "config" / "crd" / "bases").glob("*.yaml")
    apply_manifests(kube_api, crd_file)
    yield project
    client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(f"carts.{GROUP}")


@pytest.fixture(scope="module")
def namespace(kube_api: client.ApiClient) -> Iterator[str]:
    name = f"extravars-attacks-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    password_file = tmp_path_factory.mktemp("vault") / "vault-password"
    password_file.write_text(VAULT_PASSWORD)
    password_file.chmod(0o600)
    return password_file


@pytest.fixture(scope="module", params=["warm", "reference"])
def operator(
    request: pytest.FixtureRequest,
    kube_cluster: Cluster,
    project: Path,
    namespace: str,
    secrets: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path_factory.mktemp("operator") / "operator.log",
        args=[f"--runner-mode={request.param}"],
        env={"WATCH_NAMESPACE": namespace, "ANSIBLE_VAULT_PASSWORD_FILE": str(secrets)},
    ).start()
    yield process
    process.stop()


def cart(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Cart",
        "metadata": {"name": name},
        "spec": spec,
    }


def create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> str:
    name = f"{body['metadata']['name']}-{uuid.uuid4().hex[:5]}"
    body["metadata"]["name"] = name
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "carts", body
    )
    return name


def condition(api: client.ApiClient, namespace: str, name: str, kind: str) -> dict[str, Any]:
    found = wait_for_condition(api, GROUP, VERSION, "carts", namespace, name, kind, timeout=120)
    return next(c for c in found["status"]["conditions"] if c["type"] == kind)


def refused(api: client.ApiClient, namespace: str, name: str, *words: str) -> str:
    """The Failure's message, once its RefusedData Event is there too; both name `words`."""
    failure = condition(api, namespace, name, "Failure")
    assert failure["reason"] == "RefusedData", failure
    event = eventually(
        lambda: next(
            (e for e in events_for(api, namespace, name) if e.reason == "RefusedData"), None
        ),
        timeout=60,
        what="a RefusedData Event",
    )
    for word in words:
        assert word in failure["message"], failure
        assert word in event.message, event.message
    return str(failure["message"])


def payload(marker: Path) -> str:
    return "{{ lookup('pipe', 'id > " + str(marker) + "; echo 0') }}"


@pytest.mark.parametrize("tag", ["__ANSIBLE_VAULT", "__AnsibleUnsafe", "__Ansible_Vault"])
def test_a_tag_like_key_in_any_case_beside_jinja_is_refused_and_nothing_runs(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    tag: str,
) -> None:
    marker = tmp_path / "pwned"
    name = create(
        kube_api, namespace, cart("tagged", {"x": {tag: "a"}, "sleepFor": payload(marker)})
    )

    message = refused(kube_api, namespace, name, f"spec.x.{tag}")

    assert "not run" in message
    assert not marker.exists(), "a spec value ran a command as the operator"


def test_jinja_without_any_tag_reaches_the_command_as_text(
    operator: OperatorProcess, kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    name = create(kube_api, namespace, cart("jinja", {"sleepFor": payload(marker)}))

    # `sleep {{ lookup(...) }}` as text: sleep refuses the argument, the run fails.
    failure = condition(kube_api, namespace, name, "Failure")

    assert failure["reason"] != "RefusedData"
    assert not marker.exists(), "a spec value ran a command as the operator"


def test_the_operators_vault_ciphertext_under_any_spelling_is_never_decrypted(
    operator: OperatorProcess, kube_api: client.ApiClient, namespace: str
) -> None:
    ciphertext = vault_ciphertext(VAULTED_TEXT, VAULT_PASSWORD)
    name = create(kube_api, namespace, cart("vaulted", {"x": {"__ANSIBLE_VAULT": ciphertext}}))

    refused(kube_api, namespace, name, "spec.x.__ANSIBLE_VAULT")

    assert VAULTED_TEXT not in operator.logs


def test_a_spec_key_cannot_forge_what_the_role_registers(
    operator: OperatorProcess, kube_api: client.ApiClient, namespace: str
) -> None:
    name = create(kube_api, namespace, cart("forged", {"gate": {"rc": 0, "stdout": "open"}}))

    message = refused(kube_api, namespace, name, "spec.gate")

    assert f"roles/cart/tasks/main.yml:{GATE_LINE} (register)" in message
    assert "specMayOverride" in message


def test_an_honest_cart_is_served_beside_the_refused_ones(
    operator: OperatorProcess, kube_api: client.ApiClient, namespace: str
) -> None:
    # The gate stays closed (`false` fails): the role's own decision stands.
    name = create(kube_api, namespace, cart("honest", {"sleepFor": "0"}))

    failure = condition(kube_api, namespace, name, "Failure")

    assert "the gate is closed" in failure["message"]


def test_a_loader_that_trusts_unsafe_data_gets_no_data_and_runs_nothing(
    kube_cluster: Cluster,
    project: Path,
    kube_namespace: str,  # not the other operators' namespace: this one alone serves it
    kube_api: client.ApiClient,
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(TRUSTING_LOADER)
    marker = tmp_path / "pwned"
    process = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": kube_namespace, "PYTHONPATH": str(site)},
    ).start()
    try:
        name = create(kube_api, kube_namespace, cart("trusting", {"sleepFor": payload(marker)}))

        message = refused(kube_api, kube_namespace, name, "reads neither form of unsafe data")

        assert "not run" in message
        assert not marker.exists(), "a spec value ran a command as the operator"
    finally:
        process.stop()
