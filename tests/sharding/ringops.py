"""Helpers of the sharding suite: a ring of replicas of tests/sharding/operator,
the objects they share, what their runs logged, and the ring's Leases.

The operator's role writes, per replica (SHARD_RUNS_LOG), one line per event:

    start <replica> <namespace>/<name> <epoch>     a run began its work
    end <replica> <namespace>/<name> <epoch>       ... and finished it (0.3 s later)
    finalize <replica> <namespace>/<name> <epoch>  a finalizer run finished (0.3 s)
    clash <replica> <namespace>/<name> <epoch>     the object's lock was taken

Each run and finalizer run holds an exclusive lock on a file of its object's
(SHARD_LOCK_DIR, one directory for the whole ring) while it works: a `clash`
is a second run of one object while the first's processes still live, seen by
the kernel, however the first ended. The intervals between `start` and `end`
say the same from the logs, with the replicas and times to show.

Nothing here reads the product's code: buckets are computed here, from the
interface (FNV-1a-64 of the object's uid, in 120 equal ranges; a dependent's, its
owner's, as its label `ansible-operator.io/owner-shard` says), so the tests
check the product's arithmetic too. The namespaces are named as people name
them, in sequence (`<prefix>-00`, `<prefix>-01`, ...), not picked per bucket.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from ansible_operator.runner import proctree
from ansible_operator.testing.kinds import CustomKinds
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import condition_of, eventually

OPERATOR = Path(__file__).resolve().parent / "operator"
GROUP, VERSION, KIND, PLURAL = "ring.example.com", "v1alpha1", "Shardling", "shardlings"
KINDS = CustomKinds(GROUP, VERSION, {KIND: PLURAL})
RESOURCE = f"{GROUP}/{VERSION}/{PLURAL}"  # the `resource` label of watch_events_total

BUCKETS = 120
RING_LABEL = "ansible-operator.io/shard-ring"
HELD_ANNOTATION = "ansible-operator.io/shards-held"
OWNER_SHARD_LABEL = "ansible-operator.io/owner-shard"
LEASE_SECONDS = 6
HOLD = 0.3  # seconds a run holds its object (the role's default `hold`)
RING_TIMINGS = [
    f"--leader-elect-lease-duration={LEASE_SECONDS}s",
    "--leader-elect-renew-deadline=4s",
    "--leader-elect-retry-period=1s",
]


# ----- buckets -------------------------------------------------------------------


def fnv1a64(text: str) -> int:
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def bucket_of(uid: str) -> int:
    """The bucket of an object of this uid (the API server's `object.metadata.uid`
    key): which of 120 equal ranges of the hash space its hash is in."""
    return (fnv1a64(uid) * BUCKETS) >> 64


def parse_buckets(text: str) -> frozenset[int]:
    """'0-5,9' -> {0, 1, 2, 3, 4, 5, 9}."""
    held: set[int] = set()
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        first, _, last = part.partition("-")
        held.update(range(int(first), int(last or first) + 1))
    return frozenset(held)


def namespace_names(count: int, prefix: str = "ring") -> list[str]:
    """`count` fresh namespace names in sequence, as people name them
    (`ring-1a2b3c-00`, `ring-1a2b3c-01`, ...): under the namespace's hash they
    would all share one bucket."""
    run = uuid.uuid4().hex[:6]
    return [f"{prefix}-{run}-{index:02d}" for index in range(count)]


def buckets_of(api: client.ApiClient, spaces: Iterable[str]) -> dict[str, int]:
    """The bucket of each Shardling of `spaces`, by 'namespace/name'."""
    return {
        key: bucket_of(obj["metadata"]["uid"]) for key, obj in list_objects(api, spaces).items()
    }


# ----- namespaces and objects ------------------------------------------------------


@contextlib.contextmanager
def namespaces(api: client.ApiClient, names: Iterable[str]) -> Iterator[list[str]]:
    """Create the namespaces; at the end delete them, dropping the finalizers of
    the Shardlings left in them (their operator is gone by then), so that none
    stays Terminating."""
    core = client.CoreV1Api(api)
    created: list[str] = []
    try:
        for name in names:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
            created.append(name)
        yield created
    finally:
        custom = client.CustomObjectsApi(api)
        for name in created:
            with contextlib.suppress(client.ApiException):
                core.delete_namespace(name)
            with contextlib.suppress(client.ApiException):
                for item in custom.list_namespaced_custom_object(GROUP, VERSION, name, PLURAL)[
                    "items"
                ]:
                    if item["metadata"].get("finalizers"):
                        with contextlib.suppress(client.ApiException):
                            custom.patch_namespaced_custom_object(
                                GROUP,
                                VERSION,
                                name,
                                PLURAL,
                                item["metadata"]["name"],
                                {"metadata": {"finalizers": None}},
                            )


def object_keys(spaces: Iterable[str], count: int) -> list[str]:
    """`count` keys 'namespace/name', spread round-robin over `spaces`."""
    spaces = list(spaces)
    return [f"{spaces[i % len(spaces)]}/obj-{i}" for i in range(count)]


def create_objects(api: client.ApiClient, keys: Iterable[str], **spec: Any) -> None:
    def create(key: str) -> None:
        namespace, _, name = key.partition("/")
        KINDS.create(api, namespace, KIND, name, **spec)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(create, keys))


def patch_objects(api: client.ApiClient, keys: Iterable[str], **spec: Any) -> None:
    def patch(key: str) -> None:
        namespace, _, name = key.partition("/")
        KINDS.patch_spec(api, namespace, KIND, name, spec)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(patch, keys))


def delete_objects(api: client.ApiClient, keys: Iterable[str]) -> None:
    for key in keys:
        namespace, _, name = key.partition("/")
        KINDS.delete(api, namespace, KIND, name)


def list_objects(api: client.ApiClient, spaces: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Every Shardling of `spaces`, by 'namespace/name' (one cluster-wide list)."""
    wanted = set(spaces)
    items = client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    return {
        f"{item['metadata']['namespace']}/{item['metadata']['name']}": item
        for item in items
        if item["metadata"]["namespace"] in wanted
    }


def done(obj: dict[str, Any]) -> bool:
    """Successful for its current generation, and no run in progress."""
    status = obj.get("status") or {}
    successful = condition_of(obj, "Successful") or {}
    running = condition_of(obj, "Running") or {}
    return (
        successful.get("status") == "True"
        and status.get("observedGeneration") == obj["metadata"]["generation"]
        and running.get("status") != "True"
    )


def _status_line(key: str, obj: dict[str, Any] | None) -> str:
    if obj is None:
        return f"  {key}: absent"
    status = obj.get("status") or {}
    conditions = {
        c.get("type"): f"{c.get('status')}:{c.get('reason', '')}"
        for c in status.get("conditions") or []
    }
    failure = condition_of(obj, "Failure") or {}
    return (
        f"  {key} (bucket {bucket_of(obj['metadata']['uid'])}): "
        f"generation {obj['metadata']['generation']}, "
        f"observed {status.get('observedGeneration')}, conditions {conditions}"
        + (f", failure: {failure.get('message')}" if failure.get("status") == "True" else "")
    )


def wait_all_done(
    api: client.ApiClient,
    spaces: Iterable[str],
    keys: Iterable[str],
    *,
    timeout: float,
    describe: Callable[[], str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every object of `keys` exists and is Successful for its generation."""
    spaces, expected = list(spaces), sorted(keys)
    holder: dict[str, dict[str, Any]] = {}

    def check() -> dict[str, dict[str, Any]] | None:
        holder.clear()
        holder.update(list_objects(api, spaces))
        pending = [k for k in expected if k not in holder or not done(holder[k])]
        return None if pending else dict(holder)

    def explain() -> str:
        pending = [k for k in expected if k not in holder or not done(holder[k])]
        lines = [f"{len(pending)} of {len(expected)} objects not Successful for their generation:"]
        lines += [_status_line(k, holder.get(k)) for k in pending[:15]]
        if describe is not None:
            lines.append(describe())
        return "\n".join(lines)

    return eventually(
        check, timeout=timeout, interval=1.0, describe=explain, what="every object Successful"
    )


def wait_gone(
    api: client.ApiClient, spaces: Iterable[str], keys: Iterable[str], *, timeout: float
) -> None:
    spaces, gone = list(spaces), sorted(keys)
    eventually(
        lambda: not set(gone) & set(list_objects(api, spaces)),
        timeout=timeout,
        interval=1.0,
        what="the deleted objects gone",
        describe=lambda: (
            "still there: " + ", ".join(sorted(set(gone) & set(list_objects(api, spaces)))[:20])
        ),
    )


class Churn:
    """A thread that patches the spec (`round`) of random objects of `keys`,
    one at a time, until stopped: changes while the ring moves."""

    def __init__(self, api: client.ApiClient, keys: Iterable[str], pause: float = 0.05) -> None:
        self.api = api
        self.keys = list(keys)
        self.pause = pause
        self.patched: dict[str, int] = defaultdict(int)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="churn", daemon=True)

    def _loop(self) -> None:
        rng = random.Random(28)
        while not self._stop.is_set():
            key = rng.choice(self.keys)
            namespace, _, name = key.partition("/")
            self.patched[key] += 1
            try:
                KINDS.patch_spec(self.api, namespace, KIND, name, {"round": self.patched[key]})
            except client.ApiException as error:
                self.errors.append(f"{key}: {error.status} {error.reason}")
            self._stop.wait(self.pause)

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    @property
    def total(self) -> int:
        return sum(self.patched.values())


# ----- replicas --------------------------------------------------------------------


@dataclasses.dataclass
class Replica:
    name: str
    process: OperatorProcess
    runs_log: Path
    ended_at: float | None = None  # when it was stopped, or its last process died (epoch)
    killed: bool = False

    @property
    def alive(self) -> bool:
        return self.ended_at is None

    def metric(self, name: str, /, **labels: str) -> float:
        return self.process.metric(name, **labels)

    def filtering(self, ring: str) -> str:
        """ "server" when the API server filters its watches by shard, else "client"."""
        server_side = self.metric("ansible_operator_shard_server_side", ring=ring)
        return "server" if server_side == 1 else "client"

    def unfinished(self) -> list[Run]:
        """Its runs with a `start` and no `end` (yet)."""
        return [run for run in read_runs([self.runs_log]).runs if run.end is None]


class Ring:
    """Replicas of the sharding operator in one ring, over the test's namespaces."""

    def __init__(
        self,
        kubeconfig: Path,
        api: client.ApiClient,
        workdir: Path,
        *,
        spaces: Iterable[str],
        lease_namespace: str,
        name: str | None = None,
        args: Iterable[str] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.api = api
        self.workdir = workdir
        self.spaces = list(spaces)
        self.lease_namespace = lease_namespace
        self.name = name or f"shardlings-{uuid.uuid4().hex[:4]}"
        self.args = list(args)
        self.locks = workdir / "locks"
        self.locks.mkdir(parents=True, exist_ok=True)
        self.replicas: dict[str, Replica] = {}

    def start(self, *names: str) -> list[Replica]:
        """Start replicas with these POD_NAMEs; return once each is ready (it
        has joined the ring, its controllers run) and its Lease is there."""
        started = [self._start(name) for name in names]
        for replica in started:
            replica.process.wait_ready(timeout=120)
            eventually(
                lambda replica=replica: self.lease_of(replica.name) is not None,
                timeout=30,
                what=f"{replica.name}'s ring Lease",
                describe=self.describe,
            )
        return started

    def _start(self, name: str) -> Replica:
        assert name not in self.replicas or not self.replicas[name].alive
        runs_log = self.workdir / f"runs-{name}.log"
        runs_log.touch()
        process = OperatorProcess(
            OPERATOR / "watches.yaml",
            self.kubeconfig,
            log_path=self.workdir / f"operator-{name}.log",
            args=[
                f"--shard-ring={self.name}",
                f"--leader-election-namespace={self.lease_namespace}",
                *RING_TIMINGS,
                SERVE_METRICS,
                *self.args,
            ],
            env={
                "POD_NAME": name,
                "WATCH_NAMESPACE": ",".join(self.spaces),
                "SHARD_RUNS_LOG": str(runs_log),
                "SHARD_LOCK_DIR": str(self.locks),
            },
        )
        replica = Replica(name, process, runs_log)
        self.replicas[name] = replica
        process.start(wait_ready=False)
        return replica

    @property
    def live(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.alive]

    def kill(self, name: str) -> float:
        """kill -9 the replica's process group; return when. Its runs live in
        sessions of their own and die after it (the parent-death signals and
        cgroups of the product): `ended_at` is when the last of its processes
        is gone, the latest a run of it can have worked."""
        replica = self.replicas[name]
        replica.process.kill()
        signalled = time.time()
        eventually(
            lambda: not processes_of(replica.runs_log),
            timeout=60,
            interval=0.05,
            what=f"every process of {name} gone",
            describe=lambda: f"left: {processes_of(replica.runs_log)}",
        )
        replica.ended_at, replica.killed = time.time(), True
        return signalled

    def stop(self, name: str) -> int | None:
        """SIGTERM: the replica hands its buckets over and exits."""
        replica = self.replicas[name]
        code = replica.process.stop(timeout=60)
        replica.ended_at = time.time()
        return code

    def close(self) -> None:
        for replica in self.live:
            replica.process.stop(timeout=30)
            replica.ended_at = time.time()

    # ----- the Leases --------------------------------------------------------------

    def leases(self) -> list[client.V1Lease]:
        return (
            client.CoordinationV1Api(self.api)
            .list_namespaced_lease(self.lease_namespace, label_selector=f"{RING_LABEL}={self.name}")
            .items
        )

    def lease_of(self, name: str) -> client.V1Lease | None:
        """The ring Lease of the member `name`, if it has one."""
        return next((x for x in self.leases() if self.member_of(x) == name), None)

    def member_of(self, lease: client.V1Lease) -> str:
        prefix = f"{self.name}-"
        lease_name = lease.metadata.name
        return lease_name[len(prefix) :] if lease_name.startswith(prefix) else lease_name

    def holdings(self) -> dict[str, frozenset[int]]:
        """The buckets each live member's Lease says it holds."""
        leases = self.leases()
        now = time.time()  # after the list: a Lease live now was live when listed
        return {self.member_of(lease): held(lease) for lease in leases if lease_live(lease, now)}

    def settled(self, members: Iterable[str]) -> dict[str, frozenset[int]] | None:
        """The holdings, once exactly `members` hold Leases that split 0-63
        between them (each bucket held once) and each member's metrics agree."""
        members = set(members)
        holdings = self.holdings()
        if set(holdings) != members:
            return None
        if sum(len(h) for h in holdings.values()) != BUCKETS:
            return None
        if frozenset().union(*holdings.values()) != frozenset(range(BUCKETS)):
            return None
        for name in members:
            replica = self.replicas[name]
            if replica.metric("ansible_operator_shard_buckets_held", ring=self.name) != len(
                holdings[name]
            ):
                return None
            if replica.metric("ansible_operator_shard_members", ring=self.name) != len(members):
                return None
        return holdings

    def wait_settled(
        self, members: Iterable[str], timeout: float = 120.0
    ) -> dict[str, frozenset[int]]:
        members = sorted(members)
        return eventually(
            lambda: self.settled(members),
            timeout=timeout,
            interval=0.5,
            what=f"ring {self.name} settled over {', '.join(members)}",
            describe=self.describe,
        )

    def describe(self) -> str:
        """The Leases and the replicas' metrics and last log lines, for a failure."""
        lines = [f"Leases of ring {self.name} (now {time.time():.3f}):"]
        for lease in self.leases():
            spec = lease.spec
            renew = spec.renew_time.timestamp() if spec.renew_time else None
            lines.append(
                f"  {lease.metadata.name}: holder {spec.holder_identity}, renewed {renew}, "
                f"duration {spec.lease_duration_seconds}s, held "
                f"{(lease.metadata.annotations or {}).get(HELD_ANNOTATION)!r}"
            )
        for replica in self.replicas.values():
            state = "alive" if replica.alive else f"ended at {replica.ended_at:.3f}"
            lines.append(f"replica {replica.name} ({state}):")
            if replica.alive:
                with contextlib.suppress(Exception):
                    for metric in (
                        "ansible_operator_shard_buckets_held",
                        "ansible_operator_shard_members",
                        "ansible_operator_shard_server_side",
                    ):
                        lines.append(f"  {metric} = {replica.metric(metric, ring=self.name)}")
                    events = replica.metric(
                        "ansible_operator_watch_events_total", resource=RESOURCE
                    )
                    lines.append(f"  watch events: {events}")
            tail = [
                line
                for line in replica.process.logs.splitlines()
                if re.search(r"shard|ring|bucket|lease|ERROR|Traceback", line, re.IGNORECASE)
            ]
            lines += [f"  | {line}" for line in tail[-25:]]
        return "\n".join(lines)

    def runs(self) -> RunsLog:
        return read_runs(r.runs_log for r in self.replicas.values())

    def killed(self) -> dict[str, float]:
        return {r.name: r.ended_at for r in self.replicas.values() if r.killed and r.ended_at}

    def wait_quiet(self, timeout: float = 60.0) -> None:
        """No run in flight on any live replica (so every run logged its end or
        was stopped)."""
        eventually(
            lambda: all(r.metric("ansible_operator_runs_in_flight") == 0 for r in self.live),
            timeout=timeout,
            interval=0.5,
            what="no run in flight",
            describe=self.describe,
        )


def processes_of(runs_log: Path) -> list[int]:
    """The live processes of the replica that writes `runs_log`: the operator,
    its warm runner, its runs and what they started, all born with
    SHARD_RUNS_LOG=runs_log in their environment (a replica's own path)."""
    marker = f"SHARD_RUNS_LOG={runs_log}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        fields = proctree.stat_fields(int(entry.name))
        if fields is not None and fields[0] != "Z" and marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def held(lease: client.V1Lease) -> frozenset[int]:
    return parse_buckets((lease.metadata.annotations or {}).get(HELD_ANNOTATION, ""))


def lease_live(lease: client.V1Lease, now: float) -> bool:
    spec = lease.spec
    stamp = spec.renew_time or spec.acquire_time
    if stamp is None or spec.lease_duration_seconds is None:
        return True  # not stamped yet: count it, so that an overlap is not missed
    return _epoch(stamp) + spec.lease_duration_seconds > now


def _epoch(stamp: datetime) -> float:
    return stamp.timestamp()


class LeaseMonitor:
    """Reads the ring's Leases every `interval` seconds (one list: a consistent
    snapshot) and records any bucket two live Leases claim at once."""

    def __init__(self, ring: Ring, interval: float = 0.5) -> None:
        self.ring = ring
        self.interval = interval
        self.samples = 0
        self.overlaps: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="leases", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                holdings = self.ring.holdings()
            except Exception as error:  # an API hiccup under load: the next sample
                self.errors.append(repr(error))
            else:
                self.samples += 1
                seen: dict[int, str] = {}
                for member, buckets in sorted(holdings.items()):
                    for bucket in sorted(buckets):
                        if bucket in seen:
                            self.overlaps.append(
                                f"at {time.time():.3f} bucket {bucket} held by both "
                                f"{seen[bucket]} and {member}: "
                                + "; ".join(f"{m}={sorted(b)}" for m, b in sorted(holdings.items()))
                            )
                        seen[bucket] = member
            self._stop.wait(self.interval)

    def __enter__(self) -> LeaseMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


class EventCounter:
    """Our own watch of every Shardling in the cluster: how many objects the API
    server sent for the kind (ADDED, MODIFIED, DELETED) while it ran, the
    number a replica that received everything would count."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.count = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="events", daemon=True)

    def _loop(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        version = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["metadata"][
            "resourceVersion"
        ]
        self._ready.set()
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    custom.list_cluster_custom_object,
                    GROUP,
                    VERSION,
                    PLURAL,
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=2,
                ):
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.count += 1
                    if self._stop.is_set():
                        break
            except Exception as error:  # 410 Gone would make the count wrong: say so
                self.errors.append(repr(error))
                return

    def __enter__(self) -> EventCounter:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


# ----- the runs logs -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    replica: str
    key: str  # namespace/name
    start: float
    end: float | None  # None: no `end` line (killed, stopped, or in flight)
    last: bool  # the replica's last run of this object


@dataclasses.dataclass(frozen=True)
class Mark:
    replica: str
    key: str
    at: float


@dataclasses.dataclass
class RunsLog:
    runs: list[Run]
    finalizes: list[Mark]
    clashes: list[Mark]

    def replicas_of(self) -> dict[str, set[str]]:
        """Which replicas ran each object (reconcile runs)."""
        by_key: dict[str, set[str]] = defaultdict(set)
        for run in self.runs:
            by_key[run.key].add(run.replica)
        return by_key

    def runs_of(self, key: str) -> list[Run]:
        return sorted((r for r in self.runs if r.key == key), key=lambda r: r.start)

    def finalize_counts(self) -> dict[str, list[Mark]]:
        by_key: dict[str, list[Mark]] = defaultdict(list)
        for mark in self.finalizes:
            by_key[mark.key].append(mark)
        return by_key


LINE = re.compile(r"^(start|end|finalize|clash) (\S+) (\S+/\S+) (\d+(?:\.\d+)?)$")


def read_runs(paths: Iterable[Path]) -> RunsLog:
    runs: list[Run] = []
    finalizes: list[Mark] = []
    clashes: list[Mark] = []
    for path in paths:
        if not path.exists():
            continue
        open_runs: dict[tuple[str, str], float] = {}
        closed: list[tuple[str, str, float, float | None]] = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = LINE.match(line.strip())
            if not match:
                raise AssertionError(f"{path}:{number}: not a runs-log line: {line!r}")
            what, replica, key, stamp = match.groups()
            at, slot = float(stamp), (replica, key)
            if what == "start":
                if slot in open_runs:  # the one before never ended: stopped or killed
                    closed.append((replica, key, open_runs.pop(slot), None))
                open_runs[slot] = at
            elif what == "end":
                if slot not in open_runs:
                    raise AssertionError(f"{path}:{number}: end without start: {line!r}")
                closed.append((replica, key, open_runs.pop(slot), at))
            elif what == "finalize":
                finalizes.append(Mark(replica, key, at))
            else:
                clashes.append(Mark(replica, key, at))
        closed += [(replica, key, start, None) for (replica, key), start in open_runs.items()]
        latest: dict[tuple[str, str], float] = {}
        for replica, key, start, _ in closed:
            latest[(replica, key)] = max(start, latest.get((replica, key), start))
        runs += [
            Run(replica, key, start, end, start == latest[(replica, key)])
            for replica, key, start, end in closed
        ]
    return RunsLog(runs, finalizes, clashes)


def interval(run: Run, killed: Mapping[str, float]) -> tuple[float, float, str]:
    """Where a run's work lay, [start, end], and how its end is known.

    - `end` logged: that;
    - no `end`, the replica's last run of the object, the replica killed (-9):
      until the last of its processes died (`Ring.kill`);
    - no `end` otherwise: the run was stopped (its object deleted, its bucket
      moving away, its replica stopped by SIGTERM) at a moment not logged, before
      its `end` was due: until then, start + HOLD. (A replica's exit comes after
      its Lease is gone and others may run its objects, so the exit bounds
      nothing; the lock, `clash`, sees the real end.)

    Read the logs once no run is in flight (`wait_quiet`): a run in flight has
    no `end` yet either.
    """
    if run.end is not None:
        return run.start, run.end, "ended"
    if run.last and run.replica in killed:
        return run.start, killed[run.replica], "until its replica was killed"
    return run.start, run.start + HOLD, "stopped, end not logged: start + HOLD"


def overlaps(log: RunsLog, killed: Mapping[str, float]) -> list[str]:
    """Every pair of runs of one object, by different replicas, that overlap."""
    by_key: dict[str, list[Run]] = defaultdict(list)
    for run in log.runs:
        by_key[run.key].append(run)
    found: list[str] = []
    for key, runs in sorted(by_key.items()):
        spans = sorted(((*interval(r, killed), r.replica) for r in runs), key=lambda s: s[0])
        for i, (start, end, how, replica) in enumerate(spans):
            for other_start, other_end, other_how, other in spans[i + 1 :]:
                if other_start >= end:
                    break
                if other != replica:
                    found.append(
                        f"{key}: run by {replica} "
                        f"[{start:.3f}, {end:.3f}] ({how}) overlaps run by {other} "
                        f"[{other_start:.3f}, {other_end:.3f}] ({other_how})"
                    )
    return found


def clashes(log: RunsLog) -> list[str]:
    return [
        f"{mark.key}: {mark.replica} found the object's "
        f"lock taken at {mark.at:.3f} (another run of it still live)"
        for mark in log.clashes
    ]


def no_double_runs(ring: Ring) -> list[str]:
    """Overlapping intervals and lock clashes, over every replica's runs log."""
    log = ring.runs()
    return overlaps(log, ring.killed()) + clashes(log)
