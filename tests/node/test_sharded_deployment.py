"""The shard-ring deployment (config/sharding) on the node: three replicas of
the sample operator, each holding a Lease of its own with its share of the 64
hash buckets, and what happens when one of their Pods is deleted, as a rolling
update or `kubectl delete pod` would: the Pod's replica deletes its Lease on
SIGTERM, the others take its buckets at once (not after the lease duration),
and the objects of those buckets are reconciled by the replicas that hold them
now.

Buckets are computed here, from the interface (FNV-1a-64 of the object's uid,
which of 120 equal ranges it is in), not with the product's code. Which replica holds which bucket
depends on the Pods' names and the uids on the API server, so samples are made
one namespace at a time once the ring has formed, until they fall on every
replica (or eight are made: on two at least)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from nodeops import NodeCluster, SessionNode, pod_logs, wait_for

from ansible_operator.testing.manifests import apply_manifests, documents
from kustomize_render import render

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
SYSTEM = "ansible-operator-system"  # config/manager/manager.yaml's namespace
RING = "ansible-operator-samples"  # --shard-ring in config/sharding
REPLICAS = 3
BUCKETS = 120
RING_LABEL = "ansible-operator.io/shard-ring"
STEADY = 6.0  # seconds: three retry periods (--leader-elect-retry-period, 2s)
HELD_ANNOTATION = "ansible-operator.io/shards-held"
MEMCACHED_SAMPLE = CONFIG / "samples" / "cache_v1alpha1_memcached.yaml"
GROUP, VERSION, PLURAL = "cache.example.com", "v1alpha1", "memcacheds"
SAMPLE = "memcached-sample"
# Namespaces for the samples (any names: an object's bucket is its uid's).
WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "iris",
         "jade", "kelp", "lotus", "maple", "nova", "onyx", "pine", "quartz", "raven", "sage",
         "tulip")  # fmt: skip
RBAC_KINDS = ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


# ----- buckets -------------------------------------------------------------------


def fnv1a64(text: str) -> int:
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def bucket_of(uid: str) -> int:
    """Which of the 120 equal ranges of the hash space the uid's hash is in."""
    return (fnv1a64(uid) * BUCKETS) >> 64


def parse_buckets(text: str) -> frozenset[int]:
    """'0-5,9' -> {0, 1, 2, 3, 4, 5, 9}."""
    held: set[int] = set()
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        first, _, last = part.partition("-")
        held.update(range(int(first), int(last or first) + 1))
    return frozenset(held)


def test_the_bucket_arithmetic() -> None:
    # FNV-1a-64's published vectors, and the top 6 bits.
    assert fnv1a64("") == 0xCBF29CE484222325
    assert fnv1a64("a") == 0xAF63DC4C8601EC8C
    assert bucket_of("") == (0xCBF29CE484222325 * 120) >> 64 == 95
    assert parse_buckets("0-2,9,62-63") == {0, 1, 2, 9, 62, 63}


# ----- the deployment ---------------------------------------------------------------


@dataclass
class Deployed:
    cluster: NodeCluster
    namespaces: list[str] = field(default_factory=list)  # made by the tests: deleted after


@pytest.fixture(scope="module")
def sharded(session_node: SessionNode) -> Iterator[Deployed]:
    cluster = session_node.get()
    core = cluster.core
    # test_operator_in_cluster.py deploys into the same namespace and deletes it
    # without waiting: this deployment starts once it is gone.
    wait_for(
        lambda: absent(lambda: core.read_namespace(SYSTEM)),
        f"namespace {SYSTEM} (a previous deployment's) to be gone",
        timeout=300,
    )
    images = cluster.images
    cluster.node.load([images.samples(), images.memcached()])
    for crd in sorted((CONFIG / "crd" / "bases").glob("*.yaml")):
        apply_manifests(cluster.api, crd)
    docs = render(CONFIG / "sharding")  # what `kubectl kustomize` makes of it
    namespaces = [doc for doc in docs if doc["kind"] == "Namespace"]
    rbac = [doc for doc in docs if doc["kind"] in RBAC_KINDS]
    rest = [doc for doc in docs if doc not in namespaces and doc not in rbac]
    [deployment] = [doc for doc in rest if doc["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == REPLICAS
    assert f"--shard-ring={RING}" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    deployed = Deployed(cluster)
    try:
        for group in (namespaces, rbac, rest):
            apply_manifests(cluster.api, yaml.safe_dump_all(group))
        yield deployed
    finally:
        # The Memcacheds first, while the operator runs their finalizer role, then
        # their namespaces: the role records an Event, which a namespace being
        # deleted refuses (its deletion would wait on the finalizer for ever).
        custom = client.CustomObjectsApi(cluster.api)
        for namespace in deployed.namespaces:
            with contextlib.suppress(client.ApiException):
                custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, SAMPLE)
        try:
            for namespace in deployed.namespaces:
                wait_for(
                    lambda namespace=namespace: absent(lambda: memcached(cluster, namespace)),
                    f"the Memcached in {namespace} to be finalized and deleted",
                    timeout=300,
                    details=lambda: operator_log(cluster),
                )
        finally:
            for namespace in deployed.namespaces:
                with contextlib.suppress(client.ApiException):
                    drop_finalizers(cluster, namespace)  # any left: the wait above failed
            # All deleted at once, then waited for: their Pods terminate together.
            for namespace in [*deployed.namespaces, SYSTEM]:
                with contextlib.suppress(client.ApiException):
                    core.delete_namespace(namespace)
            for namespace in [*deployed.namespaces, SYSTEM]:
                wait_for(
                    lambda namespace=namespace: absent(lambda: core.read_namespace(namespace)),
                    f"namespace {namespace} to be deleted",
                    timeout=300,
                )


def absent(read: Any) -> bool:
    try:
        read()
    except client.ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def drop_finalizers(cluster: NodeCluster, namespace: str) -> None:
    custom = client.CustomObjectsApi(cluster.api)
    for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]:
        with contextlib.suppress(client.ApiException):
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, item["metadata"]["name"],
                {"metadata": {"finalizers": None}},
            )  # fmt: skip


def operator_log(cluster: NodeCluster) -> str:
    return pod_logs(cluster, SYSTEM, tail_lines=40)


# ----- the ring ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RingLease:
    name: str
    holder: str
    held: frozenset[int]
    renewed: datetime | None
    duration: int | None


def ring_leases(cluster: NodeCluster) -> dict[str, RingLease]:
    listed = client.CoordinationV1Api(cluster.api).list_namespaced_lease(
        SYSTEM, label_selector=f"{RING_LABEL}={RING}"
    )
    return {
        lease.metadata.name: RingLease(
            lease.metadata.name,
            lease.spec.holder_identity or "",
            parse_buckets((lease.metadata.annotations or {}).get(HELD_ANNOTATION, "")),
            lease.spec.renew_time,
            lease.spec.lease_duration_seconds,
        )
        for lease in listed.items
    }


def ready_pods(cluster: NodeCluster) -> list[client.V1Pod]:
    """The operator's Pods that are Ready and not being deleted."""
    return [
        pod
        for pod in cluster.core.list_namespaced_pod(SYSTEM).items
        if pod.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    ]


def settled_ring(cluster: NodeCluster) -> dict[str, frozenset[int]] | None:
    """Pod name -> its buckets, once there are REPLICAS Ready Pods, each with its
    Lease (`<ring>-<Pod>`, held by the Pod) and a share (none: it has joined, the
    others have not handed over yet), no other Lease in the ring, and the
    Leases' buckets covering 0-63 exactly once; None until then."""
    pods = {pod.metadata.name for pod in ready_pods(cluster)}
    leases = ring_leases(cluster)
    if len(pods) != REPLICAS or set(leases) != {f"{RING}-{pod}" for pod in pods}:
        return None
    if any(lease.holder != lease.name.removeprefix(f"{RING}-") for lease in leases.values()):
        return None
    shares = {lease.holder: lease.held for lease in leases.values()}
    if not all(shares.values()) or sum(map(len, shares.values())) != BUCKETS:
        return None
    return shares if set().union(*shares.values()) == set(range(BUCKETS)) else None


def holder_of(shares: dict[str, frozenset[int]], bucket: int) -> str:
    [holder] = [pod for pod, held in shares.items() if bucket in held]
    return holder


def wait_for_settled_ring(cluster: NodeCluster, what: str) -> dict[str, frozenset[int]]:
    """`settled_ring`, unchanged for STEADY seconds (a hand-over in steps, a
    bucket at a time, may pass through states that look settled)."""
    seen: list[tuple[float, dict[str, frozenset[int]] | None]] = [(0.0, None)]

    def steady() -> dict[str, frozenset[int]] | None:
        shares = settled_ring(cluster)
        since, before = seen[0]
        if shares is None or shares != before:
            seen[0] = (time.monotonic(), shares)
            return None
        return shares if time.monotonic() - since >= STEADY else None

    return wait_for(
        steady,
        what,
        timeout=300,
        details=lambda: f"{ring_leases(cluster)}\n{operator_log(cluster)}",
    )


# ----- the samples -------------------------------------------------------------------------


def memcached(cluster: NodeCluster, namespace: str) -> dict[str, Any]:
    return client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, SAMPLE
    )


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    listed = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c["status"] for c in listed}


def reconciled(cluster: NodeCluster, namespace: str, *, available: bool = False) -> bool:
    """The last run saw the object's current generation and succeeded (and, if
    `available`, its memcached Deployment is available)."""
    obj = memcached(cluster, namespace)
    state = conditions(obj)
    return (
        (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"]
        and state.get("Successful") == "True"
        and state.get("Running") != "True"
        and (not available or state.get("Available") == "True")
    )


def create_sample(deployed: Deployed, namespace: str) -> None:
    core = deployed.cluster.core
    core.create_namespace({"metadata": {"name": namespace}})
    deployed.namespaces.append(namespace)
    sample = documents(MEMCACHED_SAMPLE)[0]
    assert sample["kind"] == "Memcached" and sample["metadata"]["name"] == SAMPLE
    # One memcached Pod each is enough here.
    apply_manifests(
        deployed.cluster.api, yaml.safe_dump({**sample, "spec": {"size": 1}}), namespace
    )


def make_samples(deployed: Deployed, shares: dict[str, frozenset[int]]) -> dict[str, str]:
    """Namespace -> the replica whose bucket its sample's uid falls in: samples
    made one namespace at a time until every replica has one, eight at most (on
    two replicas at least)."""
    picked: dict[str, str] = {}
    for word in WORDS[:8]:
        namespace = f"shard-{word}"
        create_sample(deployed, namespace)
        picked[namespace] = holder_of(shares, sample_bucket(deployed.cluster, namespace))
        if len(set(picked.values())) == len(shares):
            break
    assert len(set(picked.values())) >= 2, (shares, picked)
    return picked


def sample_bucket(cluster: NodeCluster, namespace: str) -> int:
    return bucket_of(memcached(cluster, namespace)["metadata"]["uid"])


class LogFollower:
    """A Pod's log, followed to its end (the container's exit) in a thread."""

    def __init__(self, cluster: NodeCluster, pod: str) -> None:
        self.text = ""
        self.ended = threading.Event()
        self._response = cluster.core.read_namespaced_pod_log(
            pod, SYSTEM, follow=True, _preload_content=False
        )
        threading.Thread(target=self._follow, daemon=True, name=f"log {pod}").start()

    def _follow(self) -> None:
        try:
            for chunk in self._response.stream(1024):
                self.text += chunk.decode(errors="replace")
        except Exception as error:  # the stream cut: say so in the text
            self.text += f"\n(log stream ended: {error!r})"
        finally:
            self.ended.set()


# ----- the tests ---------------------------------------------------------------------------


def test_three_replicas_share_every_bucket_once(sharded: Deployed) -> None:
    cluster = sharded.cluster
    shares = wait_for_settled_ring(
        cluster, f"{REPLICAS} Ready replicas whose Leases hold buckets 0-63 once"
    )
    assert len(shares) == REPLICAS
    # Each replica does its part (rendezvous hashing: about a third each).
    assert all(shares.values()), shares
    for pod in ready_pods(cluster):
        assert pod.spec.service_account_name == "ansible-operator"
        [container] = pod.spec.containers
        assert f"--shard-ring={RING}" in container.args


def test_deleting_one_pod_moves_its_share_to_the_others(sharded: Deployed) -> None:
    cluster = sharded.cluster
    core = cluster.core
    shares = wait_for_settled_ring(cluster, f"{REPLICAS} replicas sharing buckets 0-63")

    picked = make_samples(sharded, shares)
    for namespace, holder in picked.items():
        wait_for(
            lambda namespace=namespace: reconciled(cluster, namespace, available=True),
            f"the Memcached in {namespace} (bucket {sample_bucket(cluster, namespace)}, "
            f"{holder}'s) "
            "to be reconciled and Available",
            timeout=300,
            details=lambda: operator_log(cluster),
        )
    # Reconciled by the replica holding its bucket, and by no other.
    for namespace, holder in picked.items():
        ran = f"run succeeded kind=Memcached namespace={namespace} name={SAMPLE}"
        logs = {pod: full_log(cluster, pod) for pod in shares}
        assert ran in logs[holder], logs[holder][-3000:]
        assert not [pod for pod in shares if pod != holder and ran in logs[pod]], namespace

    # The victim: the replica of the first namespace picked.
    moved, victim = next(iter(picked.items()))
    victim_lease = f"{RING}-{victim}"
    bucket = sample_bucket(cluster, moved)
    last_seen = ring_leases(cluster)[victim_lease]
    victim_log = LogFollower(cluster, victim)
    deleted_at = time.time()
    core.delete_namespaced_pod(victim, SYSTEM)  # the default grace period, as kubectl
    # Changed after the deletion, while its replica stops: the next holder runs it.
    client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
        GROUP, VERSION, moved, PLURAL, SAMPLE, {"spec": {"size": 2}}
    )
    generation = memcached(cluster, moved)["metadata"]["generation"]

    # The Lease goes when the replica stops (an expired Lease is never deleted:
    # by expiry the buckets would move only after the lease duration), while it
    # was still live.
    def victim_lease_gone() -> float | None:
        nonlocal last_seen
        lease = ring_leases(cluster).get(victim_lease)
        if lease is not None:
            last_seen = lease
            return None
        return time.time()

    gone_at = wait_for(
        victim_lease_gone,
        f"the Lease {victim_lease} of the deleted Pod to be deleted",
        timeout=180,
        details=lambda: f"{victim_log.text[-3000:]}\n{operator_log(cluster)}",
    )
    assert last_seen.renewed is not None and last_seen.duration
    live_for = last_seen.renewed.timestamp() + last_seen.duration - gone_at
    assert live_for > 0, (
        f"the Lease went {-live_for:.1f}s after it would have expired (renewed "
        f"{last_seen.renewed}, {last_seen.duration}s)"
    )
    print(
        f"Pod {victim} deleted; its Lease gone {gone_at - deleted_at:.1f}s later, "
        f"{live_for:.1f}s before it would have expired"
    )
    victim_log.ended.wait(timeout=120)
    assert f"shard ring left ring={RING} lease={SYSTEM}/{victim_lease}" in victim_log.text, (
        victim_log.text[-3000:]
    )

    # The survivors, and the Deployment's replacement Pod once it joins, share
    # every bucket again, once each.
    after = wait_for_settled_ring(
        cluster, f"{REPLICAS} replicas, the deleted one's replacement with them, sharing 0-63"
    )
    assert victim not in after

    # The object changed after the deletion is reconciled, at its new generation,
    # by a replica that holds its bucket now.
    wait_for(
        lambda: (
            reconciled(cluster, moved)
            and memcached(cluster, moved)["status"]["observedGeneration"] >= generation
        ),
        f"the Memcached in {moved} (bucket {bucket}, was {victim}'s) to be reconciled "
        f"at generation {generation}",
        timeout=300,
        details=lambda: operator_log(cluster),
    )
    ran = f"run succeeded kind=Memcached namespace={moved} name={SAMPLE}"

    def holder_ran_it() -> str | None:
        shares = settled_ring(cluster)
        if shares is None:
            return None
        holder = holder_of(shares, bucket)
        return holder if ran in full_log(cluster, holder) else None

    holder = wait_for(
        holder_ran_it,
        f"the replica holding bucket {bucket} to have reconciled {moved}/{SAMPLE}",
        timeout=300,
        details=lambda: f"{ring_leases(cluster)}\n{operator_log(cluster)}",
    )
    assert holder != victim
    # And the other samples are still reconciled after the hand-over.
    for namespace in picked:
        wait_for(
            lambda namespace=namespace: reconciled(cluster, namespace),
            f"the Memcached in {namespace} to stay reconciled",
            timeout=300,
            details=lambda: operator_log(cluster),
        )


def full_log(cluster: NodeCluster, pod: str) -> str:
    try:
        return cluster.core.read_namespaced_pod_log(pod, SYSTEM)
    except client.ApiException as error:
        if error.status in (400, 404):  # gone, or not started yet
            return ""
        raise
