"""Our base image as a drop-in for Operator SDK's: an Operator SDK project
(osdk_project/) built with its own Dockerfile, only the FROM line naming ours,
its requirements.yml installed by `ansible-galaxy` during the build, and
deployed with its own config/ (the scaffold's manager args and env). Once per
base image flavour: the default (the newest ansible-core) and ansible-core
2.18, the one operators migrating from Operator SDK's image are likely to use."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from nodeops import NodeCluster, SessionNode, pod_logs, ready_lease_holder, wait_for

from ansible_operator.cluster.images import (
    ANSIBLE_CORE_LABEL,
    FLAVOURS,
    PYTHON_UPSTREAM,
    Flavour,
    Image,
    ImageBuilder,
    pinned_version,
    project_root,
)
from ansible_operator.testing.manifests import apply_manifests, documents

pytestmark = pytest.mark.node

PROJECT = Path(__file__).parent / "osdk_project"
CONFIG = PROJECT / "config"
IMAGE = "example.com/osdk-demo:v0.0.1"
SYSTEM = "osdk-demo-system"  # config/manager/manager.yaml's namespace
LEASE = "osdk-demo"  # its --leader-election-id
GALAXY_ADDRESS = ("127.0.0.1", 18765)  # where requirements.yml fetches the collection
GROUP, VERSION, PLURAL = "demo.example.com", "v1alpha1", "greetings"
HOME = "/opt/ansible"
COLLECTION = "opt/ansible/.ansible/collections/ansible_collections/example/greeting"


@contextlib.contextmanager
def galaxy_stand_in(directory: Path) -> Iterator[None]:
    """The collection at requirements.yml's URL: galaxy/example.greeting built
    into its tarball by ansible-galaxy and served over HTTP, as Galaxy would."""
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    source = PROJECT / "galaxy" / "example.greeting"
    subprocess.run(
        [str(galaxy), "collection", "build", str(source), "--output-path", str(directory)],
        check=True,
        capture_output=True,
    )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(GALAXY_ADDRESS, handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module", params=FLAVOURS, ids=lambda f: f.name or "default")
def flavour(request: pytest.FixtureRequest) -> Flavour:
    return request.param


@pytest.fixture(scope="module")
def osdk_image(
    session_node: SessionNode, flavour: Flavour, tmp_path_factory: pytest.TempPathFactory
) -> Image:
    with galaxy_stand_in(tmp_path_factory.mktemp("galaxy")):
        return session_node.images.project(flavour.tag(IMAGE), PROJECT, flavour)


def ansible_core_pinned(flavour: Flavour) -> str:
    return pinned_version(project_root() / flavour.constraints, "ansible-core")


def oci_blob(archive: tarfile.TarFile, digest: str) -> bytes:
    member = archive.extractfile(f"blobs/{digest.replace(':', '/')}")
    assert member is not None, digest
    return member.read()


def oci_manifest(archive: tarfile.TarFile) -> dict[str, Any]:
    index = json.loads(archive.extractfile("index.json").read())  # type: ignore[union-attr]
    return json.loads(oci_blob(archive, index["manifests"][0]["digest"]))


def image_config(image: Image) -> dict[str, Any]:
    """The image's run settings (User, Env, WorkingDir, Entrypoint, Cmd)."""
    with tarfile.open(image.archive) as archive:
        manifest = oci_manifest(archive)
        return json.loads(oci_blob(archive, manifest["config"]["digest"]))["config"]


def files_added(image: Image, base: Image) -> set[str]:
    """The paths in the layers `image` has on top of `base`'s."""
    with tarfile.open(base.archive) as archive:
        base_layers = {layer["digest"] for layer in oci_manifest(archive)["layers"]}
    names: set[str] = set()
    with tarfile.open(image.archive) as archive:
        for layer in oci_manifest(archive)["layers"]:
            if layer["digest"] in base_layers:
                continue
            member = archive.extractfile(f"blobs/{layer['digest'].replace(':', '/')}")
            with tarfile.open(fileobj=member, mode="r|*") as files:
                names.update(entry.name.removeprefix("./").rstrip("/") for entry in files)
    return names


def test_project_dockerfile_builds_on_ours_with_operator_sdk_layout(
    session_node: SessionNode, flavour: Flavour, osdk_image: Image
) -> None:
    images: ImageBuilder = session_node.images
    config = image_config(osdk_image)
    assert config["Labels"][ANSIBLE_CORE_LABEL] == ansible_core_pinned(flavour)
    assert config["Labels"]["io.github.ansible-operator.constraints"] == flavour.constraints
    env = dict(entry.split("=", 1) for entry in config.get("Env", []))
    assert env["HOME"] == HOME
    assert config["WorkingDir"] == HOME
    assert config["User"] == "1001"  # numeric: runAsNonRoot can check it
    entrypoint = config["Entrypoint"]
    assert Path(entrypoint[0]).name == "tini" and entrypoint[1] == "--", entrypoint
    assert Path(entrypoint[2]).name == "ansible-operator", entrypoint
    assert entrypoint[3:] == ["run", "--watches-file=./watches.yaml"], entrypoint
    assert not config.get("Cmd"), "a Deployment's args must follow the entrypoint alone"

    added = files_added(osdk_image, images.operator(flavour))
    for path in ("requirements.yml", "watches.yaml", "roles/greeting/tasks/main.yml",
                 "playbooks/greeting.yml"):  # fmt: skip
        assert f"opt/ansible/{path}" in added, path
    # What `ansible-galaxy collection install -r` put where Ansible looks.
    assert f"{COLLECTION}/MANIFEST.json" in added
    assert f"{COLLECTION}/plugins/modules/greet.py" in added


@pytest.fixture(scope="module")
def deployed(session_node: SessionNode, osdk_image: Image) -> Iterator[NodeCluster]:
    cluster = session_node.get()
    cluster.node.load([osdk_image])
    crd = CONFIG / "crd" / "bases" / "demo.example.com_greetings.yaml"
    manager = documents(CONFIG / "manager" / "manager.yaml")
    deployment = next(doc for doc in manager if doc["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = osdk_image.name
    namespaces = [doc for doc in manager if doc["kind"] == "Namespace"]
    rest = [doc for doc in manager if doc["kind"] != "Namespace"]
    rbac = [doc for path in sorted((CONFIG / "rbac").glob("*.yaml")) for doc in documents(path)]
    try:
        apply_manifests(cluster.api, crd)
        for docs in (namespaces, rbac, rest):
            apply_manifests(cluster.api, yaml.safe_dump_all(docs))
        yield cluster
    finally:
        cluster.core.delete_namespace(SYSTEM, grace_period_seconds=0)
        rbac_api = client.RbacAuthorizationV1Api(cluster.api)
        for doc in rbac:
            with contextlib.suppress(client.ApiException):
                if doc["kind"] == "ClusterRole":
                    rbac_api.delete_cluster_role(doc["metadata"]["name"])
                elif doc["kind"] == "ClusterRoleBinding":
                    rbac_api.delete_cluster_role_binding(doc["metadata"]["name"])
        extensions = client.ApiextensionsV1Api(cluster.api)
        with contextlib.suppress(client.ApiException):
            extensions.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
        # The next flavour deploys the same names: they must be gone first.
        wait_for(
            lambda: absent(lambda: cluster.core.read_namespace(SYSTEM)),
            f"namespace {SYSTEM} to be deleted",
            timeout=180,
        )
        wait_for(
            lambda: absent(lambda: extensions.read_custom_resource_definition(f"{PLURAL}.{GROUP}")),
            "the Greeting CRD to be deleted",
        )


def absent(read: Callable[[], object]) -> bool:
    try:
        read()
    except client.ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def operator_log(cluster: NodeCluster) -> str:
    return pod_logs(cluster, SYSTEM, tail_lines=40)


def ready_leader(cluster: NodeCluster) -> client.V1Pod | None:
    """The operator Pod holding the Lease named by --leader-election-id, once
    its readiness probe (on --health-probe-bind-address) passes."""
    return ready_lease_holder(cluster, LEASE, SYSTEM)


def settled(cluster: NodeCluster, name: str) -> dict[str, str] | None:
    """The Greeting's condition statuses, once a run has finished."""
    obj = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        GROUP, VERSION, SYSTEM, PLURAL, name
    )
    status = {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}
    done = "True" in (status.get("Successful"), status.get("Failure"))
    return status if done and status.get("Running") != "True" else None


def test_custom_object_runs_the_projects_playbook_role_and_collection(
    flavour: Flavour, deployed: NodeCluster
) -> None:
    leader = wait_for(
        lambda: ready_leader(deployed),
        "a Ready operator holding its Lease",
        timeout=240,
        details=lambda: operator_log(deployed),
    )
    assert leader.spec.service_account_name == "osdk-demo-controller-manager"
    apply_manifests(deployed.api, CONFIG / "samples" / "demo_v1alpha1_greeting.yaml", SYSTEM)

    status = wait_for(
        lambda: settled(deployed, "greeting-sample"),
        "the Greeting's run",
        timeout=240,
        details=lambda: operator_log(deployed),
    )
    assert status.get("Successful") == "True", f"{status}\n{operator_log(deployed)}"
    recorded = deployed.core.read_namespaced_config_map("greeting-sample-greeting", SYSTEM).data
    # Written by the role the playbook imports by name, from what the module
    # of the Galaxy-installed collection returned, run as the image's user, on
    # the base image's Python, by the flavour's ansible-core.
    python = PYTHON_UPSTREAM.split(":")[1].split("-")[0]  # python:3.13-slim-trixie -> 3.13
    assert recorded == {
        "greeting": "Hello, Operator SDK, from example.greeting 1.0.0",
        "uid": "1001",
        "home": HOME,
        "python": recorded["python"],
        "ansible_core": ansible_core_pinned(flavour),
    }
    assert recorded["python"].startswith(f"{python}."), recorded["python"]
