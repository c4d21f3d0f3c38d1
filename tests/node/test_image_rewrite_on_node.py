"""Harbor day-2's image rewriting webhook on a real node: a Pod whose image the webhook
pointed at the Harbor project runs from that image.

The sample operator runs beside the node (`ansible-operator run`, the webhook on loopback,
which the node's API server reaches). There is no registry: the Pod names Docker Hub's
python:3.13-slim-trixie, for which the node's own python image stands in; that image is
tagged under the rewritten name in the node's containerd first, as a Harbor mirror would
serve it, and the Pod's tag (not `latest`) means the kubelet never pulls.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from nodeops import NodeCluster, SessionNode, has_default_service_account, pod_phase, wait_for

from ansible_operator.cluster.images import PYTHON_UPSTREAM, Image
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "config" / "crd" / "bases"
HARBOR_CRDS = ("goharbor.io_harborserverconfigurations.yaml", "goharbor.io_pullsecretbindings.yaml")
GROUP, VERSION, PLURAL = "goharbor.io", "v1alpha1", "harborserverconfigurations"
HARBOR = "harbor.example.com"
REWRITTEN = f"{HARBOR}/mirror/library/{PYTHON_UPSTREAM}"


@pytest.fixture(scope="module")
def cluster(session_node: SessionNode) -> NodeCluster:
    return session_node.get()


@pytest.fixture(scope="module")
def operator(
    cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    for crd in HARBOR_CRDS:
        apply_manifests(cluster.api, CRDS / crd)
    process = OperatorProcess(
        ROOT / "watches.yaml",
        cluster.plane.kubeconfig,
        log_path=tmp_path_factory.mktemp("rewrite-operator") / "operator.log",
        args=[
            "--webhook-bind-address=127.0.0.1:0",
            f"--webhook-configuration-name=image-rewrite-{uuid.uuid4().hex[:6]}",
        ],
        cwd=ROOT,
    ).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def issuer(cluster: NodeCluster, operator: OperatorProcess) -> Iterator[str]:
    """A HarborServerConfiguration (not the default one) mapping Docker Hub to `mirror`."""
    custom = client.CustomObjectsApi(cluster.api)
    name = f"hsc-{uuid.uuid4().hex[:8]}"
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "HarborServerConfiguration",
            "metadata": {"name": name},
            "spec": {
                "serverURL": f"https://{HARBOR}",
                "accessCredential": {"namespace": "default", "accessSecretRef": "none"},
                "rules": [{"registryRegex": "^docker.io$", "project": "mirror"}],
            },
        },
    )
    yield name
    custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    # Its finalizer (the proxy-cache cleanup) needs the operator: gone before it stops.
    wait_for(
        lambda: (
            name
            not in {
                item["metadata"]["name"]
                for item in custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
            }
        ),
        f"HarborServerConfiguration {name} deleted",
        details=lambda: operator.logs[-3000:],
    )


@pytest.fixture
def auto_namespace(cluster: NodeCluster, operator: OperatorProcess, issuer: str) -> Iterator[str]:
    """A namespace asking for rewriting by its issuer's rules. Gone before the operator
    stops: the namespace controller bound it, and that binding's finalizer needs us."""
    core = cluster.core
    name = f"rewrite-{uuid.uuid4().hex[:8]}"
    annotations = {"goharbor.io/image-rewrite": "auto", "goharbor.io/secret-issuer": issuer}
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, annotations=annotations))
    )
    wait_for(lambda: has_default_service_account(core, name), "the default ServiceAccount")
    yield name
    core.delete_namespace(name, grace_period_seconds=0)
    wait_for(
        lambda: name not in {n.metadata.name for n in core.list_namespace().items},
        f"namespace {name} deleted",
        details=lambda: operator.logs[-3000:],
    )


@pytest.fixture
def mirrored_image(cluster: NodeCluster) -> Iterator[str]:
    """The node's python image under the name Harbor's mirror would give it."""
    python: Image = cluster.images.test_python()
    cluster.node.ctr("images", "tag", "--force", python.name, REWRITTEN)
    yield REWRITTEN
    cluster.node.ctr("images", "rm", REWRITTEN, check=False)


def test_rewritten_pod_runs_from_the_harbor_projects_image(
    cluster: NodeCluster, operator: OperatorProcess, auto_namespace: str, mirrored_image: str
) -> None:
    core = cluster.core
    script = "import platform, time; print('python', platform.python_version(), flush=True)"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": PYTHON_UPSTREAM,  # as a user writes it: Docker Hub's python
                    "command": ["python3", "-c", f"{script}; time.sleep(600)"],
                }
            ],
        },
    }

    # The API server calls a new webhook configuration a moment after it is made.
    def rewritten_on_dry_run() -> bool:
        dry = core.create_namespaced_pod(auto_namespace, pod, dry_run="All")
        return dry.spec.containers[0].image == REWRITTEN

    wait_for(rewritten_on_dry_run, "the webhook rewriting", details=lambda: operator.logs[-3000:])
    core.create_namespaced_pod(auto_namespace, pod)

    wait_for(
        lambda: pod_phase(core, auto_namespace, "app") == "Running",
        "the rewritten Pod Running",
        timeout=120,
        details=lambda: str(core.read_namespaced_pod("app", auto_namespace).status),
    )
    running = core.read_namespaced_pod("app", auto_namespace)
    assert running.spec.containers[0].image == mirrored_image

    # What `kubectl describe pod` shows: the kubelet ran the rewritten name, from the node.
    def pulled() -> list[str]:
        events = core.list_namespaced_event(
            auto_namespace, field_selector="involvedObject.name=app,reason=Pulled"
        ).items
        return [event.message for event in events]

    wait_for(
        lambda: any(f'image "{REWRITTEN}" already present' in m for m in pulled()),
        "the kubelet's Pulled event for the rewritten image",
        details=lambda: str(pulled()),
    )
    wait_for(
        lambda: "python 3.13" in core.read_namespaced_pod_log("app", auto_namespace),
        "the container's output",
    )
