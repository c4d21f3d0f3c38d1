"""What each replica of a ring reconciles, for objects as clusters hold them:
the share of every replica is 1/N to within 25 % for N = 2, 3 and 5, whatever
the namespaces are called and however the objects sit in them (sequential
names, one namespace holding thousands, a namespace per object,
cluster-scoped kinds), with replicas named as Kubernetes names Pods; and a
dependent, wherever it is, belongs to its owner's replica.

The objects' uids are random UUIDs, as the API server makes them (from a
seeded generator, the seed Hypothesis' choice, so a failure replays). The shares are
computed with the product's own key, assignment and share (the API server's
`shardSelector` ranges are the same FNV-1a-64 ranges: tests/sharding checks
the server against them)."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_operator.kube.object_share import ObjectShare
from ansible_operator.kube.shard_keys import fnv1a64, object_bucket
from ansible_operator.kube.types import Owner
from ansible_operator.proxy.ownership import inject
from ansible_operator.sharding.assignment import assign

OBJECTS = 3000  # enough that a replica's share is its buckets', not luck
TOLERANCE = 0.25


@dataclass(frozen=True)
class Workload:
    what: str
    namespaces: list[str]  # of each object, in order ("" for a cluster-scoped kind)


def _sequential(prefix: str, separator: str, width: int, count: int) -> list[str]:
    return [f"{prefix}{separator}{index:0{width}d}" for index in range(count)]


def _spread(namespaces: list[str]) -> list[str]:
    """OBJECTS objects, round-robin over `namespaces`."""
    return [namespaces[index % len(namespaces)] for index in range(OBJECTS)]


_PREFIX = st.sampled_from(["tenant", "team", "customer", "shard", "ns", "prod-eu", "t"])
SEQUENTIAL = st.builds(
    lambda prefix, separator, width, count: Workload(
        f"{count} namespaces {prefix}{separator}0..",
        _spread(_sequential(prefix, separator, width, count)),
    ),
    _PREFIX,
    st.sampled_from(["-", "", "_"]),
    st.integers(1, 4),
    st.integers(2, 1000),
)
LETTERS = st.builds(
    lambda prefix: Workload(
        f"namespaces {prefix}-a..z",
        _spread([f"{prefix}-{c}" for c in "abcdefghijklmnopqrstuvwxyz"]),
    ),
    _PREFIX,
)
FEW_LARGE = st.builds(
    lambda names: Workload(f"{len(names)} namespaces of thousands", _spread(names)),
    st.lists(
        st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True), min_size=1, max_size=5, unique=True
    ),
)
ONE_EACH = st.builds(
    lambda prefix: Workload("a namespace per object", _sequential(prefix, "-", 0, OBJECTS)),
    _PREFIX,
)
CLUSTER_SCOPED = st.just(Workload("a cluster-scoped kind", [""] * OBJECTS))
WORKLOADS = st.one_of(SEQUENTIAL, LETTERS, FEW_LARGE, ONE_EACH, CLUSTER_SCOPED)

_ALNUM = "bcdfghjklmnpqrstvwxz2456789"


@st.composite
def replicas(draw: st.DrawFn) -> list[str]:
    """2, 3 or 5 Pod names as a Deployment's or a StatefulSet's."""
    count = draw(st.sampled_from([2, 3, 5]))
    name = draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True))
    if draw(st.booleans()):
        return [f"{name}-{index}" for index in range(count)]
    template = draw(st.text(_ALNUM, min_size=9, max_size=10))
    suffixes = draw(
        st.lists(
            st.text(_ALNUM, min_size=5, max_size=5), min_size=count, max_size=count, unique=True
        )
    )
    return [f"{name}-{template}-{suffix}" for suffix in suffixes]


# A seed of the uids' generator, not Hypothesis' own random: its draws shrink
# towards zeros, and uids all alike are not what the API server makes.
SEEDS = st.integers(0, 2**64)


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


@settings(max_examples=60, deadline=None)
@given(WORKLOADS, replicas(), SEEDS)
def test_each_replica_reconciles_one_nth_of_the_objects_whatever_their_names(
    workload: Workload, members: list[str], seed: int
) -> None:
    rng = random.Random(seed)
    objects = [
        {"metadata": {"name": f"obj-{index}", "namespace": namespace, "uid": _uid(rng)}}
        for index, namespace in enumerate(workload.namespaces)
    ]
    shares = {}
    for member, buckets in assign(members).items():
        share = ObjectShare(buckets)
        shares[member] = sum(share.holds(obj) for obj in objects)
    assert sum(shares.values()) == len(objects)  # each object on exactly one replica
    fair = len(objects) / len(members)
    worst = max(abs(count - fair) / fair for count in shares.values())
    assert worst <= TOLERANCE, f"{workload.what}, {len(members)} replicas: {shares}"


@settings(max_examples=100, deadline=None)
@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
    SEEDS,
    st.sampled_from([2, 3, 5]),
)
def test_a_dependent_belongs_to_its_owner_s_replica_wherever_it_is(
    owner_namespace: str, dependent_namespace: str, seed: int, count: int
) -> None:
    rng = random.Random(seed)
    owner_uid = _uid(rng)
    owner = Owner("example.com", "v1", "Widget", owner_namespace, "w", owner_uid)
    owner_obj = {"metadata": {"name": "w", "namespace": owner_namespace, "uid": owner_uid}}
    made = {"metadata": {"name": "cm", "namespace": dependent_namespace}}
    dependent = inject(made, owner, dependent_namespace or None, shard_label=True).body
    dependent["metadata"]["uid"] = _uid(rng)  # its own uid: not what it is keyed by
    for buckets in assign(f"replica-{index}" for index in range(count)).values():
        share = ObjectShare(buckets)
        assert share.holds(dependent, "owner") == share.holds(owner_obj, "self")


def test_the_namespace_key_would_put_sequential_names_on_one_replica() -> None:
    """Why the key is the uid: the top bits of FNV-1a-64 of sequential names
    (the API server's `object.metadata.namespace` key) hardly move, so the
    namespace key's 64 buckets (the ring's before) held them all in one."""

    def namespace_bucket(namespace: str) -> int:
        return fnv1a64(namespace) >> 58

    assert len({namespace_bucket(f"team-{index:03d}") for index in range(100)}) == 1
    assert len({namespace_bucket(f"shard-{index:02d}") for index in range(60)}) == 1
    assert len({namespace_bucket(f"customer-{c}") for c in "abcdefghijklmnopqrstuvwxyz"}) == 1
    by_uid = Counter(
        object_bucket({"metadata": {"uid": _uid(random.Random(index))}}) for index in range(100)
    )
    assert len(by_uid) > 40
