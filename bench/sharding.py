"""Sharding: 1, 2, 3 replicas of one shard ring sharing N objects over M namespaces.

    .venv/bin/python bench/sharding.py [--replicas 1,2,3] [--objects 300] [--namespaces 30]
                                       [--gate on|off] [--seconds 1] [--workers 2]
                                       [--dependents] [--lease-duration 6]
                                       [--renew-deadline 4] [--retry-period 1]
                                       [--use-kubeconfig]

Starts its own local control plane, with the API server's feature gate
ShardedListAndWatch on (`--gate on`: each replica's lists and watches carry a
`shardSelector` for its share of the objects' uids, and the server sends it
only those) or off (`--gate off`: every replica is sent every object and keeps
its share itself, dropping the rest before they are stored). With
`--use-kubeconfig`, the cluster in KUBECONFIG instead, with whatever gates it
has (the `srv` column says which filtering the replicas found).

The operator is bench/sharding_operator: one kind, Sleeper, whose role is one
`ansible.builtin.pause` of `--seconds` (a run waits on a timer, no CPU, so that
the replicas' workers cap the result rather than the cores; each run still
costs Ansible's and the operator's CPU: `CPU %` says how close to the cores
it came), the operator writing the status as usual; with `--dependents`, each
run also keeps a ConfigMap of its Sleeper's (through the proxy, which labels
it with the owner's shard: a replica watches and caches only its owners'). M
namespaces are made once, named in sequence as people name them
(`shard-<run>-00`, `-01`, ...; `--namespaces 1`: one namespace holding every
object), plus one for the ring's Leases.

For each replica count K, one after the other on the same namespaces:

- `present`: K replicas (`--shard-ring`, POD_NAME r0..rK-1, WATCH_NAMESPACE the
  M namespaces, `--workers` reconciles and runs each, Lease timings
  `--lease-duration`/`--renew-deadline`/`--retry-period`) are started, and
  waited for until the ring is settled (`ring s`, from their start: each of
  the 120 buckets held by exactly one replica's Lease, each replica holding
  some, its gauges agreeing, the same for two retry periods). Only then are
  the N objects created (concurrently, round-robin over the namespaces):
  `Successful s` runs from the first creation to the last object Successful
  for its generation, `obj/s` is N over it, `CPU %` how busy the machine's
  cores were meanwhile (anyone's work: near 100, the cores capped it, not the
  workers). Per replica, once every object is Successful and nothing runs
  (min/max over the replicas): its objects (`objects`: those whose uid's
  bucket its Lease holds), the objects its Sleeper informer holds
  (`cached`), its reconciles (`runs`: its
  `ansible_operator_reconcile_result_total`), the objects the API server sent
  its Sleeper informer (`events`: its `ansible_operator_watch_events_total`
  over the phase) as a share of every Sleeper event the server sent (`of
  all`: our own unfiltered watch counts those) and that share times K (`xK`:
  ~1 when the server filters, ~K when each replica is sent everything), those
  it dropped as another replica's (`dropped`: its
  `ansible_operator_shard_dropped_total`), the estimated MiB its informers
  hold (`cache MiB`: the sum of its `ansible_operator_cache_bytes`), its
  operator process's resident memory (`RSS MiB`), and `srv`, its
  `ansible_operator_shard_server_side`.
- `kill` (K >= 2): `kill -9` of the replica holding most objects; at once every
  object of its share gets a new spec (a new generation). `cover s`: until the
  survivors' Leases hold all 120 buckets again (a Lease must first go unrenewed
  for `--lease-duration`); `first s`/`all s`: until the first and the last of
  those objects is Successful for the new generation; `- lease`: `all s` less
  the lease duration.
- `join`: one more replica starts (after the kill, back to K; with K = 1, the
  second). `settled s`: from its start until the ring is settled as above
  over the live replicas, the new one holding some (`joined s`: until its
  Lease was in the ring); `its share s`: until it reconciled as many objects as its
  buckets hold (a replica reconciles the objects of a bucket it takes on, as at
  a start; n/a if not within `--timeout`).
- `leave`: SIGTERM to the newest replica (a rolling update's or a scale-down's
  clean leave); at once every object of its share gets a new spec. `handed s`:
  until the others' Leases hold all 120 buckets (it stops its runs, then
  deletes its Lease; the others are woken by their watch of the Leases);
  `first s`/`all s`: its changed objects Successful again, by the others.

While it waits in `kill`, `join` and `leave` it reads the Leases every quarter
second and counts any moment when two live Leases held one bucket
(`overlaps`). At the end: the tables, then each replica log's ERROR lines and
tracebacks, if any. The objects are deleted after each K, the replicas
stopped; the namespaces are deleted at the end (also on Ctrl-C). Timings are
what this machine did, not assertions: the bench exits non-zero only when
objects were not Successful.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import threading
import time
import urllib.error
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from ansible_operator.cluster import provide
from ansible_operator.sharding.buckets import BUCKETS, bucket_of_key, parse_buckets
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.metrics import gvk_label, metric_value
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess

HERE = Path(__file__).resolve().parent / "sharding_operator"
GROUP, VERSION, KIND, PLURAL = (
    "sharding.bench.ansible-operator.io",
    "v1alpha1",
    "Sleeper",
    "sleepers",
)
RESOURCE = f"{GROUP}/{VERSION}/{PLURAL}"  # the `resource` label of watch_events_total
GVK = gvk_label(GROUP, VERSION, KIND)
RUN_LABEL = "bench.ansible-operator.io/sharding-run"
RING_LABEL = "ansible-operator.io/shard-ring"
HELD_ANNOTATION = "ansible-operator.io/shards-held"

EVERY_BUCKET = frozenset(range(BUCKETS))
POLL = 0.25  # seconds between looks at the Leases and the objects while rebalancing


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def namespace_names(run: str, count: int) -> list[str]:
    """`count` names in sequence, as people name them (one bucket under the
    namespace's hash: the uid's is what the ring splits)."""
    width = len(str(max(count - 1, 1)))
    return [f"shard-{run}-{index:0{width}d}" for index in range(count)]


# ----- the cluster side -------------------------------------------------------------


def concurrently(clients: int, calls: Iterable[Callable[[], Any]]) -> list[Any]:
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(lambda call: call(), calls))


def successful_for(item: dict[str, Any], generation: int | None = None) -> bool:
    status = item.get("status") or {}
    wanted = generation if generation is not None else item["metadata"]["generation"]
    if (status.get("observedGeneration") or 0) < wanted:
        return False
    return any(
        c.get("type") == "Successful" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


class Objects:
    """The bench's Sleepers: `count` of them over `spaces`, round-robin."""

    def __init__(self, api: client.ApiClient, spaces: list[str], count: int, args: Any) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.spaces, self.args = spaces, args
        self.keys = [(spaces[i % len(spaces)], f"s-{i}") for i in range(count)]
        self.buckets: dict[tuple[str, str], int] = {}  # of the objects made, by their uid
        self.sizes: dict[tuple[str, str], int] = {}

    def of(self, buckets: Iterable[int]) -> list[tuple[str, str]]:
        """The objects whose uid's bucket is among `buckets`."""
        wanted = set(buckets)
        return [key for key in self.keys if self.buckets.get(key) in wanted]

    def per_bucket(self, buckets: Iterable[int]) -> int:
        return len(self.of(buckets))

    def create(self) -> None:
        def create(key: tuple[str, str]) -> tuple[tuple[str, str], int]:
            namespace, name = key
            spec: dict[str, Any] = {"seconds": self.args.seconds, "size": 1}
            if self.args.dependents:
                spec["dependent"] = True
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": KIND,
                "metadata": {"name": name, "labels": {RUN_LABEL: self.args.run}},
                "spec": spec,
            }
            made = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, body
            )
            return key, bucket_of_key(made["metadata"]["uid"])

        self.sizes = dict.fromkeys(self.keys, 1)
        self.buckets = dict(
            concurrently(self.args.clients, [lambda key=key: create(key) for key in self.keys])
        )

    def change(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """A new spec for each: their new generations."""

        def patch(key: tuple[str, str]) -> tuple[tuple[str, str], int]:
            namespace, name = key
            self.sizes[key] += 1
            patched = self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": {"size": self.sizes[key]}}
            )
            return key, patched["metadata"]["generation"]

        return dict(concurrently(self.args.clients, [lambda k=k: patch(k) for k in keys]))

    def listed(self) -> dict[tuple[str, str], dict[str, Any]]:
        items = self.custom.list_cluster_custom_object(
            GROUP, VERSION, PLURAL, label_selector=f"{RUN_LABEL}={self.args.run}"
        )["items"]
        return {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in items}

    def successful(self, generations: dict[tuple[str, str], int] | None = None) -> set:
        """The keys Successful for their generation (or the one in `generations`)."""
        listed = self.listed()
        if generations is None:
            return {key for key, item in listed.items() if successful_for(item)}
        return {
            key
            for key, generation in generations.items()
            if key in listed and successful_for(listed[key], generation)
        }

    def delete(self, timeout: float) -> None:
        """Every object, then until none is left (they have no finalizers)."""

        def delete(namespace: str) -> None:
            with contextlib.suppress(client.ApiException):
                self.custom.delete_collection_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL
                )

        concurrently(self.args.clients, [lambda ns=ns: delete(ns) for ns in self.spaces])
        deadline = time.monotonic() + timeout
        while self.listed() and time.monotonic() < deadline:
            time.sleep(0.5)


class EventCounter:
    """Our own unfiltered watch of every Sleeper: how many objects the API server
    sends for the kind (ADDED, MODIFIED, DELETED) to a watcher of the whole kind."""

    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.count = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="events", daemon=True)
        self._version = ""

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for event in watch.Watch().stream(
                    self.custom.list_cluster_custom_object,
                    GROUP,
                    VERSION,
                    PLURAL,
                    resource_version=self._version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=2,
                ):
                    self._version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.count += 1
                    if self._stop.is_set():
                        return
            except Exception as error:  # a 410 would make the count wrong: say so
                self.error = repr(error)
                return

    def __enter__(self) -> EventCounter:
        listing = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        self._version = listing["metadata"]["resourceVersion"]
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def cpu_times() -> tuple[int, int]:
    """The machine's (all, idle) CPU time so far, in ticks (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(values), values[3] + values[4]


def busy_since(then: tuple[int, int]) -> float | None:
    now = cpu_times()
    total = now[0] - then[0]
    return None if total <= 0 else 1 - (now[1] - then[1]) / total


# ----- the replicas -------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    process: OperatorProcess
    launched_at: float
    dead: bool = False

    def exposition(self) -> str:
        return self.process.exposition()

    def metric(self, name: str, /, **labels: str) -> float:
        return self.process.metric(name, **labels)

    def rss_mib(self) -> float | None:
        """The operator process's resident memory (not its runs')."""
        process = self.process.process
        if process is None:
            return None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return None

    def figures(self, ring: str) -> dict[str, float]:
        text = self.exposition()
        return {
            "events": metric_value(text, "ansible_operator_watch_events_total", resource=RESOURCE),
            "dropped": metric_value(
                text, "ansible_operator_shard_dropped_total", resource=RESOURCE
            ),
            "cached": metric_value(text, "ansible_operator_cache_objects", informer=RESOURCE),
            "cache_bytes": metric_value(text, "ansible_operator_cache_bytes"),
            "runs": metric_value(text, "ansible_operator_reconcile_result_total", GVK=GVK),
            "held": metric_value(text, "ansible_operator_shard_buckets_held", ring=ring),
            "members": metric_value(text, "ansible_operator_shard_members", ring=ring),
            "server_side": metric_value(text, "ansible_operator_shard_server_side", ring=ring),
            "in_flight": metric_value(text, "ansible_operator_runs_in_flight"),
            "queued": metric_value(text, "ansible_operator_queue_depth"),
        }


class Ring:
    """Replicas of bench/sharding_operator in one ring over the bench's namespaces."""

    def __init__(
        self, kubeconfig: Path, api: client.ApiClient, args: Any, name: str, logs: Path
    ) -> None:
        self.kubeconfig, self.args, self.name, self.logs = kubeconfig, args, name, logs
        self.coordination = client.CoordinationV1Api(api)
        self.replicas: dict[str, Replica] = {}

    def start(self, name: str) -> Replica:
        """Launch a replica (not waiting for it)."""
        args = self.args
        process = OperatorProcess(
            HERE / "watches.yaml",
            self.kubeconfig,
            log_path=self.logs / f"{self.name}-{name}.log",
            args=[
                f"--shard-ring={self.name}",
                f"--leader-election-namespace={args.lease_namespace}",
                f"--leader-elect-lease-duration={args.lease_duration:g}s",
                f"--leader-elect-renew-deadline={args.renew_deadline:g}s",
                f"--leader-elect-retry-period={args.retry_period:g}s",
                f"--max-concurrent-reconciles={args.workers}",
                f"--max-concurrent-runs={args.workers}",
                "--graceful-shutdown-timeout=10s",
                SERVE_METRICS,
            ],
            env={"POD_NAME": name, "WATCH_NAMESPACE": ",".join(args.spaces)},
        )
        replica = Replica(name, process, time.monotonic())
        self.replicas[name] = replica
        process.start(wait_ready=False)
        return replica

    @property
    def live(self) -> list[Replica]:
        return [r for r in self.replicas.values() if not r.dead]

    def wait_started(self, replica: Replica, timeout: float) -> None:
        """Until it is ready (joined, its controllers running) with a Lease in the ring."""
        replica.process.wait_ready(timeout=timeout)
        deadline = time.monotonic() + timeout
        while replica.name not in self.holdings() and time.monotonic() < deadline:
            time.sleep(POLL)

    def holdings(self) -> dict[str, frozenset[int]]:
        """What each Lease of the ring says its holder holds, by holder (POD_NAME)."""
        leases = self.coordination.list_namespaced_lease(
            self.args.lease_namespace, label_selector=f"{RING_LABEL}={self.name}"
        ).items
        return {
            lease.spec.holder_identity: parse_buckets(
                (lease.metadata.annotations or {}).get(HELD_ANNOTATION, "")
            )
            for lease in leases
            if lease.spec and lease.spec.holder_identity
        }

    def live_holdings(self) -> dict[str, frozenset[int]]:
        names = {r.name for r in self.live}
        return {name: held for name, held in self.holdings().items() if name in names}

    def settled_now(self, holdings: dict[str, frozenset[int]]) -> bool:
        """The live replicas' Leases split the 120 buckets, each holds some, and each
        replica's metrics agree (it sees every member, its gauge matches its Lease)."""
        live = self.live
        if set(holdings) != {r.name for r in live} or not settled(holdings):
            return False
        if not all(holdings.values()):
            return False
        for replica in live:
            try:
                figures = replica.figures(self.name)
            except (AssertionError, OSError, urllib.error.URLError):
                return False
            if figures["members"] != len(live) or figures["held"] != len(holdings[replica.name]):
                return False
        return True

    def wait_settled(
        self, since: float, timeout: float, on_poll: Callable[[dict], None] | None = None
    ) -> tuple[float | None, dict[str, frozenset[int]]]:
        """(seconds from `since` to the first moment of a settled state that then
        stayed the same for two retry periods, or None; the last holdings seen)."""
        stable_for = 2 * self.args.retry_period + 0.5
        deadline = time.monotonic() + timeout
        holdings: dict[str, frozenset[int]] = {}
        first: float | None = None
        while time.monotonic() < deadline:
            now = time.monotonic()
            current = self.live_holdings()
            if on_poll is not None:
                on_poll(current)
            if current != holdings or not self.settled_now(current):
                first = now if self.settled_now(current) else None
                holdings = current
            elif first is not None and now - first >= stable_for:
                return first - since, holdings
            time.sleep(POLL)
        return None, holdings

    def wait_idle(self, quiet: float, timeout: float) -> None:
        """Until no replica runs nor queues anything for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        idle_since = None
        while time.monotonic() < deadline:
            busy = False
            for replica in self.live:
                with contextlib.suppress(AssertionError, OSError, urllib.error.URLError):
                    figures = replica.figures(self.name)
                    busy = busy or bool(figures["in_flight"] or figures["queued"])
            now = time.monotonic()
            if busy:
                idle_since = None
            elif idle_since is None:
                idle_since = now
            elif now - idle_since >= quiet:
                return
            time.sleep(0.5)

    def kill(self, name: str) -> None:
        replica = self.replicas[name]
        replica.process.kill()
        replica.dead = True

    def leave(self, name: str) -> None:
        """SIGTERM one replica (not waiting for it)."""
        replica = self.replicas[name]
        process = replica.process.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        replica.dead = True

    def stop(self) -> None:
        """SIGTERM every live replica at once (each hands its buckets over), then wait."""
        live = self.live
        for replica in live:
            process = replica.process.process
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
        for replica in live:
            replica.process.stop(timeout=30)
            replica.dead = True


def settled(holdings: dict[str, frozenset[int]]) -> bool:
    """Each of the 120 buckets held by exactly one of `holdings`."""
    return sum(map(len, holdings.values())) == BUCKETS and (
        frozenset().union(*holdings.values()) == EVERY_BUCKET
    )


def overlap(holdings: dict[str, frozenset[int]]) -> frozenset[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for held in holdings.values():
        twice |= seen & held
        seen |= held
    return frozenset(twice)


# ----- one replica count ----------------------------------------------------------------


@dataclass
class Round:
    replicas: int
    ring_seconds: float | None = None
    create_seconds: float | None = None
    seconds: float | None = None  # first creation -> last Successful
    successful: int = 0
    cpu_busy: float | None = None  # the machine's, over `seconds` (everyone's work)
    objects: list[int] = field(default_factory=list)  # per replica, by held buckets
    cached: list[float] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)
    events: list[float] = field(default_factory=list)
    dropped: list[float] = field(default_factory=list)
    cache_mib: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    all_events: int = 0
    server_side: list[float] = field(default_factory=list)
    # kill -9
    killed: str = ""
    killed_objects: int = 0
    cover_seconds: float | None = None
    first_seconds: float | None = None
    all_seconds: float | None = None
    changed_successful: int = 0
    # one more replica
    joined_seconds: float | None = None
    settled_seconds: float | None = None
    joiner_objects: int = 0
    share_seconds: float | None = None
    # a clean leave (SIGTERM)
    left: str = ""
    left_objects: int = 0
    handed_seconds: float | None = None
    left_first_seconds: float | None = None
    left_all_seconds: float | None = None
    overlaps: list[str] = field(default_factory=list)


def run_round(
    count: int,
    kubeconfig: Path,
    api: client.ApiClient,
    objects: Objects,
    args: Any,
    logs: Path,
    rings: list[Ring],
) -> Round:
    result = Round(count)
    ring = Ring(kubeconfig, api, args, f"bench-{args.run}-k{count}", logs)
    rings.append(ring)
    say(f"\n== {count} replica(s), ring {ring.name}")
    started = time.monotonic()
    for index in range(count):
        ring.start(f"r{index}")
    for replica in ring.live:
        ring.wait_started(replica, args.ready_timeout)
    result.ring_seconds, holdings = ring.wait_settled(started, args.timeout)
    if result.ring_seconds is None:
        say(f"ring not settled in {args.timeout:.0f} s: {describe(holdings)}")
        return result
    say(f"ring settled in {result.ring_seconds:.1f} s: " + describe(holdings))

    before = {r.name: r.figures(ring.name) for r in ring.live}
    with EventCounter(api) as events:
        began, cpu = time.monotonic(), cpu_times()
        objects.create()
        result.create_seconds = time.monotonic() - began
        say(f"{len(objects.keys)} objects created in {result.create_seconds:.1f} s")
        done, last = wait_successful(objects, None, len(objects.keys), args)
        result.successful = len(done)
        result.seconds = last - began if done else None
        result.cpu_busy = busy_since(cpu)
        ring.wait_idle(quiet=3.0, timeout=60.0)
        after = {r.name: r.figures(ring.name) for r in ring.live}
        result.all_events = events.count
        if events.error:
            say(f"our own watch ended early, its count is short: {events.error}")
    holdings = ring.live_holdings()
    for replica in ring.live:
        figures = after[replica.name]
        result.objects.append(objects.per_bucket(holdings.get(replica.name, ())))
        result.cached.append(figures["cached"])
        result.runs.append(figures["runs"] - before[replica.name]["runs"])
        result.events.append(figures["events"] - before[replica.name]["events"])
        result.dropped.append(figures["dropped"] - before[replica.name]["dropped"])
        result.cache_mib.append(figures["cache_bytes"] / 2**20)
        rss = replica.rss_mib()
        if rss is not None:
            result.rss_mib.append(rss)
        result.server_side.append(figures["server_side"])
    say(
        f"all Successful in {result.seconds or 0:.1f} s; per replica: "
        + ", ".join(
            f"{r.name} {o} objects ({c:.0f} cached, {m:.2f} MiB) {runs:.0f} runs "
            f"{e:.0f} events {d:.0f} dropped"
            for r, o, c, m, runs, e, d in zip(
                ring.live,
                result.objects,
                result.cached,
                result.cache_mib,
                result.runs,
                result.events,
                result.dropped,
                strict=True,
            )
        )
        + f"; our watch saw {result.all_events} events"
    )

    if count >= 2:
        kill_one(ring, objects, holdings, result, args)
    join_one(ring, objects, result, args)
    if len(ring.live) >= 2:
        leave_one(ring, objects, result, args)
    return result


def wait_successful(
    objects: Objects, generations: dict | None, total: int, args: Any
) -> tuple[set, float]:
    """(the objects Successful, when the last became so), polling every POLL seconds;
    gives up after `--timeout` seconds without progress."""
    done: set = set()
    last = progressed = told = time.monotonic()
    while len(done) < total and time.monotonic() - progressed < args.timeout:
        now = time.monotonic()
        seen = objects.successful(generations)
        if len(seen - done):
            last = progressed = now
            done |= seen
        if now - told > 30:
            say(f"  {len(done)}/{total} Successful")
            told = now
        time.sleep(POLL)
    if len(done) < total:
        say(f"  {total - len(done)} objects not Successful after {args.timeout:.0f} s idle")
    return done, last


def describe(holdings: dict[str, frozenset[int]]) -> str:
    return ", ".join(f"{name} {len(held)} buckets" for name, held in sorted(holdings.items()))


class ReplicaExited(Exception):
    pass


def note_overlap(result: Round, holdings: dict[str, frozenset[int]], phase: str) -> None:
    twice = overlap(holdings)
    if twice:
        result.overlaps.append(f"{phase}: buckets {sorted(twice)} held twice: {describe(holdings)}")


def kill_one(
    ring: Ring, objects: Objects, holdings: dict[str, frozenset[int]], result: Round, args: Any
) -> None:
    victim = max(ring.live, key=lambda r: objects.per_bucket(holdings.get(r.name, ())))
    share = holdings.get(victim.name, frozenset())
    keys = objects.of(share)
    result.killed, result.killed_objects = victim.name, len(keys)
    say(f"kill -9 {victim.name} ({len(share)} buckets, {len(keys)} objects)")
    killed_at = time.monotonic()
    ring.kill(victim.name)
    generations = objects.change(keys)
    say(f"  {len(keys)} of its objects changed {time.monotonic() - killed_at:.1f} s after")
    deadline = killed_at + args.timeout + args.lease_duration
    done: set = set()
    while time.monotonic() < deadline:
        now = time.monotonic()
        holdings = ring.live_holdings()
        note_overlap(result, holdings, "after the kill")
        if result.cover_seconds is None and frozenset().union(*holdings.values()) == EVERY_BUCKET:
            result.cover_seconds = now - killed_at
            say(
                f"  survivors hold all {BUCKETS} buckets "
                f"{result.cover_seconds:.1f} s after the kill"
            )
        seen = objects.successful(generations) - done
        if seen:
            done |= seen
            if result.first_seconds is None:
                result.first_seconds = now - killed_at
            if len(done) == len(keys):
                result.all_seconds = now - killed_at
        if result.cover_seconds is not None and len(done) == len(keys):
            break
        time.sleep(POLL)
    result.changed_successful = len(done)
    if result.all_seconds is not None:
        say(
            f"  its {len(keys)} objects Successful again {result.all_seconds:.1f} s after the "
            f"kill ({result.all_seconds - args.lease_duration:+.1f} s on the lease duration)"
        )


def leave_one(ring: Ring, objects: Objects, result: Round, args: Any) -> None:
    """SIGTERM the newest replica, its objects changed at once: until the others
    hold every bucket and its objects are Successful again."""
    leaver = ring.live[-1]
    share = ring.live_holdings().get(leaver.name, frozenset())
    keys = objects.of(share)
    result.left, result.left_objects = leaver.name, len(keys)
    say(f"SIGTERM {leaver.name} ({len(share)} buckets, {len(keys)} objects)")
    left_at = time.monotonic()
    ring.leave(leaver.name)
    generations = objects.change(keys)
    deadline = left_at + args.timeout
    done: set = set()
    while time.monotonic() < deadline:
        now = time.monotonic()
        holdings = ring.live_holdings()
        note_overlap(result, holdings, f"after {leaver.name} left")
        if result.handed_seconds is None and holdings and settled(holdings):
            result.handed_seconds = now - left_at
            say(
                f"  the others hold all {BUCKETS} buckets "
                f"{result.handed_seconds:.1f} s after SIGTERM"
            )
        seen = objects.successful(generations) - done
        if seen:
            done |= seen
            if result.left_first_seconds is None:
                result.left_first_seconds = now - left_at
            if len(done) == len(keys):
                result.left_all_seconds = now - left_at
        if result.handed_seconds is not None and len(done) == len(keys):
            break
        time.sleep(POLL / 2)
    leaver.process.stop(timeout=30)
    if result.left_all_seconds is not None:
        say(f"  its objects Successful again {result.left_all_seconds:.1f} s after SIGTERM")


def join_one(ring: Ring, objects: Objects, result: Round, args: Any) -> None:
    name = f"r{len(ring.replicas)}"
    say(f"{name} joins")
    runs_before = {r.name: r.metric("ansible_operator_reconcile_result_total") for r in ring.live}
    replica = ring.start(name)

    def on_poll(holdings: dict[str, frozenset[int]]) -> None:
        if result.joined_seconds is None and name in holdings:
            result.joined_seconds = time.monotonic() - replica.launched_at  # its Lease is there
        note_overlap(result, holdings, f"after {name} joined")
        process = replica.process.process
        if process is not None and process.poll() is not None:
            raise ReplicaExited(f"{name} exited with {process.returncode}")

    try:
        result.settled_seconds, holdings = ring.wait_settled(
            replica.launched_at, args.ready_timeout + args.timeout, on_poll
        )
    except ReplicaExited as exited:
        say(f"  {exited}")
        return
    if result.settled_seconds is None:
        say(f"  not settled: {describe(holdings)}")
        return
    share = holdings[name]
    result.joiner_objects = objects.per_bucket(share)
    say(
        f"  settled {result.settled_seconds:.1f} s after its start: {describe(holdings)}; "
        f"{name} has {result.joiner_objects} objects"
    )
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and result.joiner_objects:
        with contextlib.suppress(AssertionError, OSError, urllib.error.URLError):
            if replica.metric("ansible_operator_reconcile_result_total") >= result.joiner_objects:
                result.share_seconds = time.monotonic() - replica.launched_at
                break
        time.sleep(0.5)
    ring.wait_idle(quiet=2.0, timeout=30.0)
    note_overlap(result, ring.live_holdings(), f"after {name} joined")
    others = {
        r.name: r.metric("ansible_operator_reconcile_result_total") - runs_before[r.name]
        for r in ring.live
        if r.name in runs_before
    }
    say(
        f"  {name} ran {replica.metric('ansible_operator_reconcile_result_total'):.0f} "
        "reconciles; meanwhile the others ran "
        + ", ".join(f"{n} {v:.0f}" for n, v in sorted(others.items()))
    )


# ----- the report ------------------------------------------------------------------------


def _cell(value: float | None, spec: str, width: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{format(value, spec):>{width}}"


def _span(values: list[float], spec: str = ".0f") -> str:
    if not values:
        return "n/a"
    return f"{min(values):{spec}}/{max(values):{spec}}"


def report(rounds: list[Round], args: Any, source: str, cpus: int) -> None:
    where = "one namespace" if args.namespaces == 1 else f"{args.namespaces} namespaces in sequence"
    print(
        f"\n{args.objects} objects over {where}, gate ShardedListAndWatch "
        f"{args.gate if source == 'local' else 'as the cluster has it'} ({source} cluster), "
        f"role: pause {args.seconds} s{' and a dependent ConfigMap' if args.dependents else ''}, "
        f"{args.workers} workers per replica, Leases "
        f"{args.lease_duration:g}s/{args.renew_deadline:g}s/{args.retry_period:g}s, {cpus} CPUs; "
        "objects created once the ring was settled"
    )
    print(
        f"{'replicas':>8} {'ring s':>6} {'Successful s':>12} {'obj/s':>6} {'CPU %':>5} "
        f"{'objects':>9} {'cached':>9} {'runs':>9} {'events':>11} {'of all':>6} {'xK':>5} "
        f"{'dropped':>9} {'cache MiB':>11} {'RSS MiB':>9} {'srv':>5}"
    )
    for r in rounds:
        rate = r.successful / r.seconds if r.seconds else None
        share = [e / r.all_events for e in r.events] if r.all_events else []
        mean_share = sum(share) / len(share) if share else None
        print(
            f"{r.replicas:>8} {_cell(r.ring_seconds, '.1f', 6)} {_cell(r.seconds, '.1f', 12)} "
            f"{_cell(rate, '.2f', 6)} "
            f"{_cell(None if r.cpu_busy is None else 100 * r.cpu_busy, '.0f', 5)} "
            f"{_span(r.objects):>9} {_span(r.cached):>9} {_span(r.runs):>9} "
            f"{_span(r.events):>11} {_cell(mean_share, '.2f', 6)} "
            f"{_cell(None if mean_share is None else mean_share * r.replicas, '.2f', 5)} "
            f"{_span(r.dropped):>9} {_span(r.cache_mib, '.2f'):>11} {_span(r.rss_mib):>9} "
            f"{_span(r.server_side):>5}"
        )
    print(
        "(CPU %: the machine's cores busy while the objects were reconciled, anyone's work; "
        "objects (by their uids' buckets), cached, runs, events, dropped, cache MiB, RSS MiB: "
        "min/max over the replicas; of all: a replica's events over what an unfiltered watch "
        "of the kind was sent, mean; xK: that times the replicas)"
    )
    print(
        f"\n{'replicas':>8} {'killed':>12} {'cover s':>7} {'first s':>7} {'all s':>7} "
        f"{'- lease':>7} {'joined':>6} {'joined s':>8} {'settled s':>9} {'its objects':>11} "
        f"{'its share s':>11} {'left':>10} {'handed s':>8} {'first s':>7} {'all s':>7} "
        f"{'overlaps':>8}"
    )
    for r in rounds:
        killed = f"{r.killed} ({r.killed_objects})" if r.killed else "-"
        left = f"{r.left} ({r.left_objects})" if r.left else "-"
        over = None if r.all_seconds is None else r.all_seconds - args.lease_duration
        print(
            f"{r.replicas:>8} {killed:>12} {_cell(r.cover_seconds, '.1f', 7)} "
            f"{_cell(r.first_seconds, '.1f', 7)} {_cell(r.all_seconds, '.1f', 7)} "
            f"{_cell(over, '+.1f', 7)} "
            f"{'->' + str(r.replicas if r.killed else r.replicas + 1):>6} "
            f"{_cell(r.joined_seconds, '.1f', 8)} {_cell(r.settled_seconds, '.1f', 9)} "
            f"{r.joiner_objects:>11} {_cell(r.share_seconds, '.1f', 11)} {left:>10} "
            f"{_cell(r.handed_seconds, '.1f', 8)} {_cell(r.left_first_seconds, '.1f', 7)} "
            f"{_cell(r.left_all_seconds, '.1f', 7)} {len(r.overlaps):>8}"
        )
    print(
        "(kill: seconds from kill -9 of the replica holding most objects, its objects changed "
        "at once; - lease: all s less the lease duration; join: seconds from the new replica's "
        "start; left: SIGTERM of the newest replica, its objects changed at once: seconds "
        "until the others hold every bucket, and its objects are Successful again)"
    )
    for r in rounds:
        for line in r.overlaps:
            print(f"{r.replicas} replicas: {line}")


def log_problems(rings: list[Ring]) -> None:
    for ring in rings:
        for replica in ring.replicas.values():
            lines = [
                line
                for line in replica.process.logs.splitlines()
                if re.search(r"\bERROR\b|Traceback|shard ring lost", line)
            ]
            if lines:
                print(f"\n{replica.process.log_path}: {len(lines)} ERROR/traceback lines, first:")
                for line in lines[:5]:
                    print(f"  {line[:300]}")


# ----- main ------------------------------------------------------------------------------


def api_client(kubeconfig: Path, clients: int) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = clients
    return client.ApiClient(configuration)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2,3", help="replica counts, one after the other")
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--namespaces", type=int, default=30)
    parser.add_argument("--gate", choices=("on", "off"), default="on")
    parser.add_argument("--seconds", type=int, default=1, help="each run's pause (whole seconds)")
    parser.add_argument("--workers", type=int, default=2, help="reconciles and runs per replica")
    parser.add_argument("--lease-duration", type=float, default=6.0)
    parser.add_argument("--renew-deadline", type=float, default=4.0)
    parser.add_argument("--retry-period", type=float, default=1.0)
    parser.add_argument(
        "--dependents", action="store_true", help="each run keeps a ConfigMap of its object's"
    )
    parser.add_argument("--use-kubeconfig", action="store_true", help="the cluster in KUBECONFIG")
    parser.add_argument("--clients", type=int, default=8, help="threads creating and changing")
    parser.add_argument("--ready-timeout", type=float, default=180.0)
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds without progress before giving up"
    )
    args = parser.parse_args()
    counts = [int(part) for part in args.replicas.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        parser.error("--replicas: counts of at least 1")
    if args.namespaces < 1:
        parser.error("--namespaces: at least 1")
    args.run = uuid.uuid4().hex[:6]
    args.spaces = namespace_names(args.run, args.namespaces)
    args.lease_namespace = f"shard-{args.run}-leases"
    logs = Path(tempfile.mkdtemp(prefix=f"ansible-operator-sharding-{args.run}-"))
    say(f"replica logs: {logs}")
    gates = {"ShardedListAndWatch": args.gate == "on"}
    rounds: list[Round] = []
    rings: list[Ring] = []
    with (
        provide(use_kubeconfig=args.use_kubeconfig, progress=say, feature_gates=gates) as cluster,
        api_client(cluster.kubeconfig, args.clients) as api,
    ):
        apply_manifests(api, HERE / "crd.yaml")
        core = client.CoreV1Api(api)
        made: list[str] = []
        objects = Objects(api, args.spaces, args.objects, args)
        try:
            for name in [*args.spaces, args.lease_namespace]:
                core.create_namespace(
                    client.V1Namespace(
                        metadata=client.V1ObjectMeta(name=name, labels={RUN_LABEL: args.run})
                    )
                )
                made.append(name)
            for count in counts:
                try:
                    rounds.append(
                        run_round(count, cluster.kubeconfig, api, objects, args, logs, rings)
                    )
                finally:
                    if rings:
                        rings[-1].stop()
                    objects.delete(timeout=120)
        except KeyboardInterrupt:
            say("interrupted: cleaning up")
        finally:
            for ring in rings:
                ring.stop()
            for name in made:
                with contextlib.suppress(client.ApiException):
                    core.delete_namespace(name)
    if rounds:
        report(rounds, args, cluster.source, cpus=os.cpu_count() or 1)
        log_problems(rings)
    lost = [r for r in rounds if r.successful < args.objects]
    sys.exit(1 if lost or not rounds else 0)


if __name__ == "__main__":
    main()
