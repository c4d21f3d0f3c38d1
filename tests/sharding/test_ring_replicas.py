"""Active-active replicas sharing objects (issues 28, 40): replicas of one shard
ring split the hash buckets of the objects' uids between them through their
Leases, each holding about 1/N of the objects (and of their dependents) in its
cache, whatever the namespaces are called (named in sequence here) and however
many objects one holds (all of them, in one test); a dependent's drift reaches
the replica of its owner, before and after a hand-over; and whatever happens
to the ring (a replica killed, replicas added and removed while objects
change), an object is never reconciled by two replicas at once, nothing is
lost, and a deleted object's finalizer runs exactly once.

The operator is tests/sharding/operator: each run logs `start`/`end` lines to
its replica's runs log and holds its object's lock file in between; ringops.py
reads those logs, the ring's Leases and the replicas' metrics.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client
from ringops import (
    BUCKETS,
    LEASE_SECONDS,
    OPERATOR,
    OWNER_SHARD_LABEL,
    RESOURCE,
    Churn,
    EventCounter,
    LeaseMonitor,
    Ring,
    buckets_of,
    create_objects,
    delete_objects,
    namespace_names,
    namespaces,
    no_double_runs,
    object_keys,
    patch_objects,
    wait_all_done,
    wait_gone,
)

from ansible_operator.cluster import Cluster
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

NAMESPACES = 30
REPLICAS = ["r0", "r1", "r2"]
DONE_TIMEOUT = 420.0  # every object Successful: generous, for a busy 2-core machine
CONFIGMAPS = "core/v1/configmaps"  # the informer of the dependents the role makes

OpenRing = Callable[..., Ring]


@pytest.fixture(scope="module")
def sharded_crds(sharded_api: client.ApiClient) -> None:
    apply_manifests(sharded_api, OPERATOR / "crds.yaml")


@pytest.fixture(scope="module")
def default_crds(kube_api: client.ApiClient) -> None:
    apply_manifests(kube_api, OPERATOR / "crds.yaml")


@pytest.fixture
def open_ring(tmp_path: Path) -> Iterator[OpenRing]:
    """`open_ring(cluster, api, count=30)`: a ring over `count` fresh namespaces
    named in sequence with its Leases in one more; its replicas are stopped and
    the namespaces deleted after the test."""
    with contextlib.ExitStack() as stack:

        def open_(cluster: Cluster, api: client.ApiClient, count: int = NAMESPACES) -> Ring:
            spaces = namespace_names(count)
            lease_namespace = f"{spaces[0]}-leases"
            stack.enter_context(namespaces(api, [*spaces, lease_namespace]))
            ring = Ring(
                cluster.kubeconfig,
                api,
                tmp_path / "ring",
                spaces=spaces,
                lease_namespace=lease_namespace,
            )
            stack.callback(ring.close)
            return ring

        yield open_


def _joined_as(ring: Ring, name: str, filtering: str) -> None:
    """Its Lease is `<ring>-<name>`, held by `name` and labelled with the ring,
    and it found the API server filtering by shard (`server`) or not (`client`)."""
    lease = ring.lease_of(name)
    assert lease is not None, ring.describe()
    assert lease.metadata.name == f"{ring.name}-{name}", lease.metadata.name
    assert lease.spec.holder_identity == name, lease.spec.holder_identity
    assert lease.metadata.labels.get("ansible-operator.io/shard-ring") == ring.name
    assert ring.replicas[name].filtering(ring.name) == filtering


def _one_replica_each(ring: Ring, keys: list[str]) -> None:
    """Every object was reconciled, and by one replica only."""
    ran = ring.runs().replicas_of()
    never = [k for k in keys if k not in ran]
    assert not never, f"{len(never)} objects never ran: {never[:10]}"
    shared = {k: sorted(v) for k, v in ran.items() if len(v) > 1}
    assert not shared, f"objects reconciled by more than one replica: {shared}"


def _only_held_buckets(
    ring: Ring, held: dict[str, frozenset[int]], buckets: dict[str, int]
) -> None:
    stray = [
        f"{run.replica} ran {run.key} (bucket {buckets[run.key]}) at {run.start:.3f}"
        for run in ring.runs().runs
        if buckets[run.key] not in held.get(run.replica, frozenset())
    ]
    assert not stray, "runs outside the replica's buckets:\n" + "\n".join(stray[:20])


def _shares(
    held: dict[str, frozenset[int]], buckets: dict[str, int], keys: list[str]
) -> dict[str, int]:
    """How many of `keys` each replica's buckets hold."""
    return {name: sum(buckets[k] in share for k in keys) for name, share in held.items()}


def _cached(ring: Ring, informer: str) -> dict[str, float]:
    """Objects each live replica's informer holds (0: it has none)."""
    return {
        replica.name: replica.metric("ansible_operator_cache_objects", informer=informer)
        for replica in ring.live
    }


def _caching(ring: Ring, informer: str, expected: dict[str, int]) -> None:
    """Until each live replica's informer holds `expected` objects (the last
    events of the runs' writes may still be on their way)."""
    eventually(
        lambda: _cached(ring, informer) == expected,
        timeout=60,
        interval=0.5,
        what=f"{informer} cached as {expected}",
        describe=lambda: f"cached: {_cached(ring, informer)}",
    )


def _no_double_runs(ring: Ring, monitor: LeaseMonitor) -> None:
    ring.wait_quiet()
    doubles = no_double_runs(ring)
    assert not doubles, "an object reconciled by two replicas at once:\n" + "\n".join(doubles)
    assert monitor.samples > 0, monitor.errors
    assert not monitor.overlaps, "two live Leases held one bucket:\n" + "\n".join(
        monitor.overlaps[:10]
    )


def _stable_counts(ring: Ring, counter: EventCounter) -> tuple[int, dict[str, float]]:
    """What our own watch and each replica counted, once neither moves (the
    last status writes' events delivered)."""
    last: list[tuple[int, dict[str, float]]] = []

    def steady() -> tuple[int, dict[str, float]] | None:
        reading = (
            counter.count,
            {
                r.name: r.metric("ansible_operator_watch_events_total", resource=RESOURCE)
                for r in ring.live
            },
        )
        same = bool(last) and last[-1] == reading
        last.append(reading)
        return reading if same else None

    return eventually(steady, timeout=60, interval=1.5, what="event counts steady")


def test_three_replicas_share_the_objects_and_the_server_filters(
    open_ring: OpenRing,
    sharded_cluster: Cluster,
    sharded_api: client.ApiClient,
    sharded_crds: None,
) -> None:
    """150 objects over 30 namespaces named in sequence (which one bucket of the
    namespaces' hash would hold): each replica reconciles, receives and caches
    its third, and one in ten has a dependent, cached by its owner's replica only."""
    ring = open_ring(sharded_cluster, sharded_api)
    keys = object_keys(ring.spaces, 150)
    with_dependent = keys[::10]
    with EventCounter(sharded_api) as counter, LeaseMonitor(ring) as monitor:
        ring.start(*REPLICAS)
        for name in REPLICAS:
            _joined_as(ring, name, "server")
        held = ring.wait_settled(REPLICAS)
        # The objects arrive once the ring has settled, so that no share moves
        # while they are reconciled.
        create_objects(sharded_api, [k for k in keys if k not in with_dependent])
        create_objects(sharded_api, with_dependent, dependent=True)
        wait_all_done(sharded_api, ring.spaces, keys, timeout=DONE_TIMEOUT, describe=ring.describe)
        _no_double_runs(ring, monitor)
        sent, received = _stable_counts(ring, counter)
    assert not counter.errors, counter.errors
    assert ring.settled(REPLICAS) == held, "the shares moved though no replica came or went"

    buckets = buckets_of(sharded_api, ring.spaces)
    _one_replica_each(ring, keys)
    _only_held_buckets(ring, held, buckets)
    for replica in ring.live:
        assert replica.metric("ansible_operator_shard_server_side", ring=ring.name) == 1

    # Each replica caches its share of the objects and of their dependents,
    # and nothing else: memory ~1/N of one replica's.
    share = _shares(held, buckets, keys)
    dependents = _shares(held, buckets, with_dependent)
    _caching(ring, RESOURCE, share)
    _caching(ring, CONFIGMAPS, dependents)
    for name, count in share.items():
        assert count <= 0.5 * len(keys), f"{name} holds more than half: {share}"

    # What reached each replica: about its share of what the server sent for
    # the kind. `sent` is our own watch's count over the same time (each object
    # changes several times: created, finalizer added, status Running, then
    # Successful), so a replica that received everything would count `sent`.
    report = (
        f"the server sent {sent} events of {RESOURCE} for {len(keys)} objects; the replicas "
        f"received {received}; their shares of the objects {share}, of the dependents "
        f"{dependents}"
    )
    print(report)
    for name, count in received.items():
        assert count < 0.7 * sent, f"{name} received more than its share: {report}"
        assert count >= share[name], f"{name} missed objects of its share: {report}"
        dropped = ring.replicas[name].metric(
            "ansible_operator_shard_dropped_total", resource=RESOURCE
        )
        assert dropped == 0, f"{name} was sent another share's objects: {report}"
    total = sum(received.values())
    assert total <= sent + max(30, sent // 20), f"objects sent to more than one replica: {report}"
    assert total >= len(keys), report


def test_one_namespace_is_shared_filtered_locally_and_a_dependent_s_drift_follows_a_hand_over(
    open_ring: OpenRing, kube_cluster: Cluster, kube_api: client.ApiClient, default_crds: None
) -> None:
    """Every object in one namespace, on a cluster without ShardedListAndWatch:
    each replica is sent every object and keeps (caches) only its share, the
    rest dropped and counted; its dependents it is sent and caches only its
    own (by label, which every server filters). Then one replica leaves
    (SIGTERM): the survivors take its objects, and a change by hand of one of
    their dependents is put back by the run of the replica that holds its
    owner now. 90 objects: what differs from the test above is where the
    filtering happens, which every object exercises alike."""
    ring = open_ring(kube_cluster, kube_api, count=1)
    keys = object_keys(ring.spaces, 90)
    with_dependent = keys[::5]
    with LeaseMonitor(ring) as monitor:
        ring.start(*REPLICAS)
        for name in REPLICAS:
            _joined_as(ring, name, "client")
        held = ring.wait_settled(REPLICAS)
        create_objects(kube_api, [k for k in keys if k not in with_dependent])
        create_objects(kube_api, with_dependent, dependent=True)
        wait_all_done(kube_api, ring.spaces, keys, timeout=DONE_TIMEOUT, describe=ring.describe)
        ring.wait_quiet()
        assert ring.settled(REPLICAS) == held, "the shares moved though no replica came or went"

        buckets = buckets_of(kube_api, ring.spaces)
        _one_replica_each(ring, keys)
        _only_held_buckets(ring, held, buckets)
        share = _shares(held, buckets, keys)
        dependents = _shares(held, buckets, with_dependent)
        _caching(ring, RESOURCE, share)
        _caching(ring, CONFIGMAPS, dependents)
        for replica in ring.live:
            assert replica.metric("ansible_operator_shard_server_side", ring=ring.name) == 0
            received = replica.metric("ansible_operator_watch_events_total", resource=RESOURCE)
            dropped = replica.metric("ansible_operator_shard_dropped_total", resource=RESOURCE)
            # Every object reached every replica (the server filters nothing), and
            # what was not its share was dropped before it was stored.
            assert received >= len(keys), f"{replica.name} received {received} of {RESOURCE}"
            assert dropped >= len(keys) - share[replica.name], (replica.name, dropped, share)
        print(f"one namespace, 90 objects: shares {share}, dependents {dependents}")

        # r2 leaves: its owners, and their dependents, go to r0 and r1.
        moved = [k for k in with_dependent if buckets[k] in held["r2"]]
        assert moved, f"no object with a dependent in r2's buckets {sorted(held['r2'])}"
        assert ring.stop("r2") == 0, ring.describe()
        after = ring.wait_settled(["r0", "r1"])
        wait_all_done(kube_api, ring.spaces, keys, timeout=DONE_TIMEOUT, describe=ring.describe)
        ring.wait_quiet()
        _caching(ring, CONFIGMAPS, _shares(after, buckets, with_dependent))

        drifted_at = time.time()
        core = client.CoreV1Api(kube_api)
        for key in moved:
            namespace, _, name = key.partition("/")
            core.patch_namespaced_config_map(
                f"{name}-dep", namespace, {"data": {"owner": "drifted"}}
            )

        def put_back() -> bool:
            for key in moved:
                namespace, _, name = key.partition("/")
                dependent = core.read_namespaced_config_map(f"{name}-dep", namespace)
                # Labelled with its owner's bucket, by the proxy.
                assert dependent.metadata.labels[OWNER_SHARD_LABEL] == str(buckets[key])
                if dependent.data.get("owner") != name:
                    return False
            return True

        eventually(put_back, timeout=DONE_TIMEOUT, what="the drifted dependents put back")
        ring.wait_quiet()
        _no_double_runs(ring, monitor)

    log = ring.runs()
    for key in moved:
        holder = next(name for name, share in after.items() if buckets[key] in share)
        repaired = [r.replica for r in log.runs_of(key) if r.start > drifted_at]
        assert repaired and set(repaired) == {holder}, (key, holder, repaired)


def test_a_killed_replica_s_buckets_are_taken_over_once_its_lease_expires(
    open_ring: OpenRing,
    sharded_cluster: Cluster,
    sharded_api: client.ApiClient,
    sharded_crds: None,
) -> None:
    ring = open_ring(sharded_cluster, sharded_api)
    keys = object_keys(ring.spaces, 90)
    with LeaseMonitor(ring) as monitor:
        ring.start(*REPLICAS)
        held = ring.wait_settled(REPLICAS)
        # The victim: the replica with the most of the objects, so that many of
        # them still wait for it when it dies.
        create_objects(sharded_api, keys)
        buckets = buckets_of(sharded_api, ring.spaces)
        victim = max(REPLICAS, key=lambda n: (sum(buckets[k] in held[n] for k in keys), n))
        survivors = [n for n in REPLICAS if n != victim]
        victim_keys = [k for k in keys if buckets[k] in held[victim]]
        assert victim_keys, f"no object in {victim}'s buckets {sorted(held[victim])}"
        # Killed mid-run: just after a run's `start`, well before its `end`
        # (0.3 s later).
        eventually(
            lambda: any(time.time() - r.start < 0.1 for r in ring.replicas[victim].unfinished()),
            timeout=120,
            interval=0.02,
            what=f"{victim} running",
        )
        killed_at = ring.kill(victim)
        dead_at = ring.replicas[victim].ended_at
        assert dead_at is not None
        lease = next(x for x in ring.leases() if ring.member_of(x) == victim)
        expires = lease.spec.renew_time.timestamp() + lease.spec.lease_duration_seconds
        # Changes after the kill: every object, the victim's included.
        patching_from = time.time()
        patch_objects(sharded_api, keys, round=1)

        after = ring.wait_settled(survivors, timeout=LEASE_SECONDS + 120)
        assert held[victim] <= after[survivors[0]] | after[survivors[1]]
        wait_all_done(sharded_api, ring.spaces, keys, timeout=DONE_TIMEOUT, describe=ring.describe)
        _no_double_runs(ring, monitor)

    # Its runs died with it, before its Lease expired (none outlived it into
    # the survivors' time).
    assert dead_at < expires, (
        f"{victim}'s processes lived until {dead_at:.3f}, past its Lease's expiry {expires:.3f}"
    )
    log = ring.runs()
    unfinished = [r for r in log.runs if r.replica == victim and r.end is None]
    assert unfinished, f"{victim} was killed between runs, not during one: {ring.describe()}"
    print(
        f"{victim} killed at {killed_at:.3f} with {len(unfinished)} runs unfinished, its last "
        f"process gone at {dead_at:.3f}; its Lease "
        f"expired at {expires:.3f}; {len(victim_keys)} of {len(keys)} objects in its buckets"
    )
    # Its buckets waited for its Lease to expire.
    early = [
        f"{r.replica} ran {r.key} at {r.start:.3f}"
        for r in log.runs
        if r.replica in survivors and r.key in victim_keys and r.start < expires
    ]
    assert not early, f"{victim}'s objects run before its Lease expired at {expires:.3f}: {early}"
    # Every object changed after the kill was reconciled again, by a survivor.
    for key in keys:
        assert any(r.replica in survivors and r.start > patching_from for r in log.runs_of(key)), (
            f"{key} not reconciled by a survivor after the kill: {log.runs_of(key)}"
        )
    # The survivors kept their own buckets but a few (shares stay within one
    # bucket of equal: a few move between them too) and took the victim's.
    for name in survivors:
        lost = held[name] - after[name]
        assert len(lost) <= BUCKETS // 4, f"{name} lost buckets: {sorted(lost)}"


def test_scaling_one_to_three_to_one_loses_nothing_and_finalizes_once(
    open_ring: OpenRing, kube_cluster: Cluster, kube_api: client.ApiClient, default_crds: None
) -> None:
    """Scale 1 -> 3 -> 1 with objects changing all along, and some deleted while
    the two extra replicas leave (SIGTERM: each hands over at once). On the
    cluster without ShardedListAndWatch; the kill test covers the server's
    filtering while buckets move."""
    ring = open_ring(kube_cluster, kube_api)
    keys = object_keys(ring.spaces, 60)
    with LeaseMonitor(ring) as monitor:
        ring.start("r0")
        ring.wait_settled(["r0"])
        create_objects(kube_api, keys)

        with Churn(kube_api, keys) as up:
            ring.start("r1", "r2")
            three = ring.wait_settled(REPLICAS)
            eventually(
                lambda: all(ring.runs().runs_of(k) for k in keys),
                timeout=DONE_TIMEOUT,
                what="every object run once",
            )
        assert not up.errors, up.errors
        assert three["r0"] != frozenset(range(BUCKETS)), "r0 kept every bucket"

        # Deleted as r1 and r2 leave: first 4 of each one's objects, so that
        # finalizer runs are in flight there when they are told to stop, then 12
        # more of anyone's while they go.
        buckets = buckets_of(kube_api, ring.spaces)

        def of(name: str) -> list[str]:
            return [k for k in keys if buckets[k] in three[name]]

        assert of("r1") and of("r2"), f"r1 or r2 has none of the objects: {three}"
        first = of("r1")[:4] + of("r2")[:4]
        then = [k for k in keys[::5] if k not in first][:12]
        kept = [k for k in keys if k not in first + then]
        with Churn(kube_api, kept) as down:
            delete_objects(kube_api, first)
            eventually(
                lambda: ring.replicas["r1"].metric("ansible_operator_runs_in_flight") > 0,
                timeout=120,
                interval=0.05,
                what="a run in flight on r1",
            )
            leaving = threading.Thread(target=lambda: [ring.stop("r1"), ring.stop("r2")])
            leaving.start()
            for key in then:
                delete_objects(kube_api, [key])
                time.sleep(0.2)  # spread over the move, not a wait for a condition
            leaving.join(180)
            assert not leaving.is_alive(), "r1 and r2 did not stop"
            ring.wait_settled(["r0"])
        assert not down.errors, down.errors
        assert up.total and down.total
        doomed = first + then

        wait_gone(kube_api, ring.spaces, doomed, timeout=DONE_TIMEOUT)
        wait_all_done(kube_api, ring.spaces, kept, timeout=DONE_TIMEOUT, describe=ring.describe)
        _no_double_runs(ring, monitor)

    for name in ("r1", "r2"):
        assert ring.replicas[name].process.process is not None
        assert ring.replicas[name].process.process.returncode == 0, ring.describe()
    log = ring.runs()
    ran_by = {r.replica for r in log.runs}
    assert {"r1", "r2"} <= ran_by, f"the replicas added ran nothing: {ran_by}"
    finalized = log.finalize_counts()
    wrong = {
        k: [f"{m.replica}@{m.at:.3f}" for m in finalized.get(k, [])]
        for k in doomed
        if len(finalized.get(k, [])) != 1
    }
    assert not wrong, f"finalizers not run exactly once: {wrong}"
    stray = sorted(set(finalized) - set(doomed))
    assert not stray, f"finalizers of objects never deleted: {stray}"
