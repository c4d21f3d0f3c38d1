"""`ansible-operator demo`: the README's first command.

Brings up the local control plane (or uses the cluster in KUBECONFIG), installs
the sample operators' CRDs, runs `ansible-operator run` over this repository's
watches.yaml, and walks two samples to their final state while you watch:

- a Memcached reaches `Successful` with its Deployment sized by `spec.size`,
  and, where the local control plane has a node (root: `cluster/node.py`), its
  memcached Pods run for real from an image built here; elsewhere the demo
  says why it stayed API-only;
- a HarborCluster creates its database, cache and storage, waits for them,
  then creates Harbor and becomes `healthy`. No PostgreSQL, Redis or MinIO
  operator runs here, so the demo plays their part: it marks each dependency
  ready on its status, as their operators would.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubernetes import client, config

from ansible_operator.cluster import LocalControlPlane, default_state_dir, local_binaries, provide
from ansible_operator.cluster.images import ImageBuilder
from ansible_operator.cluster.node import LocalNode, node_unavailable_reason
from ansible_operator.testing.manifests import apply_manifests, documents
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import get_custom

# (group, version, plural, name suffix, status its operator writes when ready)
HARBOR_DEPENDENCIES = (
    ("acid.zalan.do", "v1", "postgresqls", "database", {"PostgresClusterStatus": "Running"}),
    (
        "databases.spotahome.com",
        "v1",
        "redisfailovers",
        "cache",
        {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]},
    ),
    ("minio.min.io", "v2", "tenants", "storage", {"currentState": "Initialized"}),
    (
        "goharbor.io",
        "v1beta1",
        "harbors",
        "",
        {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "up"}]},
    ),
)


def _say(message: str) -> None:
    print(message, flush=True)


def _project_root() -> Path:
    for candidate in (Path.cwd(), *Path.cwd().parents):
        if (candidate / "watches.yaml").exists() and (candidate / "config" / "samples").exists():
            return candidate
    raise SystemExit(
        "ansible-operator demo: run it from the ansible-operator repository "
        "(it needs watches.yaml, roles/ and config/)"
    )


def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.5)
    raise SystemExit(f"ansible-operator demo: {what} did not happen within {timeout:.0f}s")


def _condition(obj: dict[str, Any] | None, kind: str) -> str:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return "-"


def _memcached(api: client.ApiClient, root: Path, namespace: str, pods_run: bool) -> None:
    sample = root / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
    obj = documents(sample)[0]
    name = obj["metadata"]["name"]
    _say(f"\n== Memcached {namespace}/{name} (spec.size={obj['spec'].get('size', 1)})")
    apply_manifests(api, sample, namespace)
    done = _until(
        lambda: (
            (o := get_custom(api, "cache.example.com", "v1alpha1", "memcacheds", namespace, name))
            and _condition(o, "Successful") == "True"
            and o
        ),
        180,
        "Memcached Successful",
    )
    deployment = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    owner = deployment.metadata.owner_references[0]
    _say(
        f"   Successful=True; Deployment {name}: replicas={deployment.spec.replicas}, "
        f"owned by {owner.kind}/{owner.name} (controller={owner.controller}); "
        f"ansibleResult={_ansible_result(done)}"
    )
    if pods_run:
        _memcached_pods(api, namespace, name, deployment.spec.replicas)


def _memcached_pods(api: client.ApiClient, namespace: str, name: str, replicas: int) -> None:
    core = client.CoreV1Api(api)
    selector = f"app.kubernetes.io/instance={name}"

    def running() -> list[client.V1Pod]:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        up = [p for p in pods if p.status.phase == "Running" and p.status.pod_ip]
        return up if len(up) >= replicas else []

    for pod in _until(running, 120, f"{replicas} memcached Pods Running"):
        _say(f"   Pod {pod.metadata.name}: Running on {pod.spec.node_name} ({pod.status.pod_ip})")
    _until(
        lambda: (
            _condition(
                get_custom(api, "cache.example.com", "v1alpha1", "memcacheds", namespace, name),
                "Available",
            )
            == "True"
        ),
        120,
        "Memcached Available",
    )
    _say("   Available=True: its status follows the Pods' readiness")


def _ansible_result(obj: dict[str, Any]) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Successful":
            return condition.get("ansibleResult") or {}
    return {}


def _harbor(api: client.ApiClient, root: Path, namespace: str) -> None:
    sample = root / "config" / "samples" / "goharbor_v1beta1_harborcluster.yaml"
    name = documents(sample)[0]["metadata"]["name"]
    _say(f"\n== HarborCluster {namespace}/{name}")
    apply_manifests(api, sample, namespace)
    custom = client.CustomObjectsApi(api)
    shown = ""
    started = time.monotonic()
    ready: set[str] = set()
    while time.monotonic() - started < 300:
        obj = get_custom(api, "goharbor.io", "v1beta1", "harborclusters", namespace, name)
        status = (obj or {}).get("status") or {}
        line = (
            f"   status={status.get('status', '-'):<9} "
            + " ".join(
                f"{kind}={_condition(obj, kind)}"
                for kind in ("DatabaseReady", "CacheReady", "StorageReady", "ServiceReady")
            )
            + f" ConfigurationReady={_condition(obj, 'ConfigurationReady')}"
        )
        if line != shown:
            _say(f"{time.monotonic() - started:5.1f}s{line}")
            shown = line
        if status.get("status") == "healthy":
            return
        for group, version, plural, suffix, ready_status in HARBOR_DEPENDENCIES:
            dependent = f"{name}-{suffix}" if suffix else name
            if (
                plural in ready
                or get_custom(api, group, version, plural, namespace, dependent) is None
            ):
                continue
            _say(f"         (as its operator would: {plural}/{dependent} is ready)")
            custom.patch_namespaced_custom_object_status(
                group, version, namespace, plural, dependent, {"status": ready_status}
            )
            ready.add(plural)
        time.sleep(0.5)
    raise SystemExit("ansible-operator demo: the HarborCluster did not become healthy in 300s")


def _progress(message: str) -> None:
    print(message, file=sys.stderr)


@contextlib.contextmanager
def _cluster(keep: bool) -> Iterator[tuple[Path, LocalNode | None]]:
    """The kubeconfig, and our local node when Pods run on one."""
    if not keep:
        with provide(progress=_progress, node=True) as cluster:
            _say(f"cluster ({cluster.source}) ready; kubeconfig {cluster.kubeconfig}")
            if cluster.no_node_reason:
                _say(f"API-only (Pods will not run): no node, {cluster.no_node_reason}")
            yield cluster.kubeconfig, cluster.node
        return
    plane = LocalControlPlane(default_state_dir(), None)
    if not (plane.state and plane.ready()):
        reason = node_unavailable_reason()
        if reason:
            _say(f"API-only (Pods will not run): no node, {reason}")
        plane = LocalControlPlane(default_state_dir(), local_binaries(), node=reason is None)
        plane.start(detached=True, progress=_progress)
        if plane.node:
            LocalNode(plane).start(detached=True, progress=_progress)
    node = LocalNode(plane) if plane.node and any(LocalNode(plane).running().values()) else None
    yield plane.kubeconfig, node
    _say(f"export KUBECONFIG={plane.kubeconfig}   # 'ansible-operator cluster down' stops it")


def run_demo(args: argparse.Namespace) -> int:
    root = _project_root()
    with (
        _cluster(args.keep) as (kubeconfig, node),
        config.new_client_from_config(str(kubeconfig)) as api,
    ):
        version = client.VersionApi(api).get_code().git_version
        if node is not None:
            _say("building the memcached image (Debian's package) and loading it into the node")
            node.load([ImageBuilder(progress=_say).memcached()], progress=_say)
        _say(f"kube-apiserver {version}: installing the samples' CRDs")
        for crd in sorted((root / "config" / "crd" / "bases").glob("*.yaml")):
            apply_manifests(api, crd)
        log_path = Path(f"/tmp/ansible-operator-demo-{uuid.uuid4().hex[:6]}.log")
        _say(f"starting `ansible-operator run` over {root / 'watches.yaml'} (log: {log_path})")
        operator = OperatorProcess(root / "watches.yaml", kubeconfig, log_path=log_path, cwd=root)
        operator.start()
        namespace = f"demo-{uuid.uuid4().hex[:5]}"
        client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
        )
        try:
            # On our node the image is loaded: its Pods must run (a KUBECONFIG
            # cluster pulls images its own way, not ours to wait for).
            _memcached(api, root, namespace, pods_run=node is not None)
            _harbor(api, root, namespace)
            _say("\nHarborCluster is healthy: the sample operators work end to end.")
        finally:
            operator.stop()
            if args.keep:
                _say(f"objects left in namespace {namespace}; operator log {log_path}")
            else:
                with contextlib.suppress(client.ApiException):
                    client.CoreV1Api(api).delete_namespace(namespace)
    return 0
