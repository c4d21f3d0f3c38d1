"""An Operator SDK Ansible project, laid out and deployed as its users do,
runs unchanged: a playbook importing a role from the project's `roles/`, a
collection installed with `ansible-galaxy collection install` into
`~/.ansible/collections`, `--ansible-args` quoted as a Deployment's `args`
pass it (no shell), and `ANSIBLE_GATHERING=explicit` as its manager.yaml sets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests, schemaless_crd
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import config_map
from ansible_operator.testing.waiting import eventually, wait_for_condition

pytestmark = pytest.mark.cluster

GROUP, VERSION = "osdk.example.com", "v1alpha1"
BIN = Path(sys.executable).parent

CRDS = [
    schemaless_crd(GROUP, kind, plural, version=VERSION)
    for kind, plural in (("Memcached", "memcacheds"), ("Probe", "probes"))
]

WATCHES = f"""\
- version: {VERSION}
  group: {GROUP}
  kind: Memcached
  playbook: playbooks/memcached.yml
- version: {VERSION}
  group: {GROUP}
  kind: Probe
  role: probe
"""
PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - import_role:
        name: memcached
"""
# The project's own role, found by name from a playbook in playbooks/.
MEMCACHED_ROLE = """\
- name: Stamp from a collection installed with ansible-galaxy
  ansible.builtin.include_role:
    name: acme.tools.stamp
- name: Record what the run saw
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-seen"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        stamp: "{{ stamp }}"
        from_args: "{{ from_args | default('missing') }}"
"""
# A role run: were facts gathered?
PROBE_ROLE = """\
- name: Record whether facts were gathered
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-facts"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        gathered: "{{ ((ansible_facts | default({})).get('system') is not none) | string }}"
"""
STAMP_ROLE = """\
- name: Set the stamp
  ansible.builtin.set_fact:
    stamp: from-acme-tools
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project as `operator-sdk init --plugins ansible` lays it out, with a
    requirements.yml collection installed the way its Dockerfile does."""
    root = tmp_path_factory.mktemp("osdk-project")
    home = root / "home"
    write(root / "watches.yaml", WATCHES)
    write(root / "playbooks" / "memcached.yml", PLAYBOOK)
    write(root / "roles" / "memcached" / "tasks" / "main.yml", MEMCACHED_ROLE)
    write(root / "roles" / "probe" / "tasks" / "main.yml", PROBE_ROLE)
    source = root / "collection-src"
    galaxy = {**os.environ, "HOME": str(home)}
    subprocess.run(
        [BIN / "ansible-galaxy", "collection", "init", "acme.tools", "--init-path", source],
        check=True,
        capture_output=True,
        env=galaxy,
    )
    write(source / "acme" / "tools" / "roles" / "stamp" / "tasks" / "main.yml", STAMP_ROLE)
    subprocess.run(
        [BIN / "ansible-galaxy", "collection", "build", source / "acme" / "tools"],
        cwd=root,
        check=True,
        capture_output=True,
        env=galaxy,
    )
    [tarball] = root.glob("acme-tools-*.tar.gz")
    write(root / "requirements.yml", f"collections:\n  - name: {tarball}\n    type: file\n")
    subprocess.run(
        [BIN / "ansible-galaxy", "collection", "install", "-r", root / "requirements.yml"],
        cwd=root,
        check=True,
        capture_output=True,
        env=galaxy,
    )
    assert (home / ".ansible" / "collections" / "ansible_collections" / "acme" / "tools").is_dir()
    return root


@pytest.fixture(scope="module")
def crds(kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("crds") / "crds.yaml"
    path.write_text(yaml.safe_dump_all(CRDS))
    apply_manifests(kube_api, path)


@pytest.fixture
def operator(
    project: Path, crds: None, kube_cluster: Cluster, kube_namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        # As a Deployment's args reach the binary: the quotes are part of the value.
        args=["--ansible-args='--extra-vars from_args=yes'"],
        env={
            "HOME": str(project / "home"),
            "WATCH_NAMESPACE": kube_namespace,
            "ANSIBLE_GATHERING": "explicit",
        },
        cwd=project,
    ).start()
    yield process
    process.stop()


def create(api: client.ApiClient, namespace: str, kind: str, plural: str, name: str) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        plural,
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}},
    )


def test_project_roles_galaxy_collections_and_quoted_ansible_args_work(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, "Memcached", "memcacheds", "cache")
    wait_for_condition(
        kube_api, GROUP, VERSION, "memcacheds", kube_namespace, "cache", "Successful"
    )
    assert config_map(kube_api, kube_namespace, "cache-seen") == {
        "stamp": "from-acme-tools",
        "from_args": "yes",
    }


def test_role_runs_skip_facts_with_ansible_gathering_explicit(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, "Probe", "probes", "run-probe")
    wait_for_condition(
        kube_api, GROUP, VERSION, "probes", kube_namespace, "run-probe", "Successful"
    )
    assert config_map(kube_api, kube_namespace, "run-probe-facts") == {"gathered": "False"}


@pytest.mark.parametrize(("gathering", "gathered"), [("explicit", "False"), ("implicit", "True")])
def test_reconcile_gathers_facts_exactly_when_run_does(
    project: Path,
    crds: None,
    kube_cluster: Cluster,
    kube_api: client.ApiClient,
    kube_namespace: str,
    gathering: str,
    gathered: str,
) -> None:
    name = f"probe-{gathering}"
    create(kube_api, kube_namespace, "Probe", "probes", name)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "ansible_operator.cli", "reconcile"),
            *(f"Probe/{name}", "-n", kube_namespace),
        ],
        cwd=project,
        env={
            **os.environ,
            "KUBECONFIG": str(kube_cluster.kubeconfig),
            "HOME": str(project / "home"),
            "ANSIBLE_GATHERING": gathering,
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    eventually(
        lambda: config_map(kube_api, kube_namespace, f"{name}-facts") == {"gathered": gathered},
        what=f"facts gathered={gathered} with ANSIBLE_GATHERING={gathering}",
    )
