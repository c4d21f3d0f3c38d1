"""Shard balance: how many objects each replica of a ring reconciles, for
objects named as people name them, by the ring's key (the uid) and by the
namespace (the key before it), with 2, 3 and 5 replicas.

    .venv/bin/python bench/shard_balance.py [--seed 40] [--trials 20]

No cluster: the objects' uids are random UUIDs, as the API server makes them
(from a seeded generator), and each replica's share is computed with the
ring's own code (kube/shard_keys.py, sharding/assignment.py): the API
server's `shardSelector` ranges are the same FNV-1a-64 ranges, so the split is
the same with the gate ShardedListAndWatch on (the server filters) or off
(each replica filters what it is sent); bench/sharding.py measures it on a
cluster. The replicas are named as a Deployment's Pods (a random template
hash and suffix each trial); for each naming and replica count, `uid` is the
fewest and the most objects a replica had over `--trials` trials (fresh uids
and Pod names each), and `worst` how far that is from 1/N; `namespace` the
same with the namespace as the key (in the same 120 buckets; the ring's
namespace key before had 64, the top 6 bits: `team-000..099` all in one).
"""

from __future__ import annotations

import argparse
import random
import string
import uuid
from collections.abc import Callable

from ansible_operator.kube.shard_keys import bucket_of_key, fnv1a64
from ansible_operator.sharding.assignment import assign

Naming = tuple[str, Callable[[], list[str]]]  # what, the namespace of each object


def _spread(namespaces: list[str], count: int) -> list[str]:
    return [namespaces[index % len(namespaces)] for index in range(count)]


NAMINGS: list[Naming] = [
    ("shard-00..11, 60 objects", lambda: _spread([f"shard-{i:02d}" for i in range(12)], 60)),
    ("shard-00..59, one each", lambda: [f"shard-{i:02d}" for i in range(60)]),
    ("team-000..099, 10 each", lambda: _spread([f"team-{i:03d}" for i in range(100)], 1000)),
    (
        "customer-a..z, 40 each",
        lambda: _spread([f"customer-{c}" for c in string.ascii_lowercase], 1040),
    ),
    ("tenant-0..999, one each", lambda: [f"tenant-{i}" for i in range(1000)]),
    ("1 namespace x 3,000", lambda: ["payments"] * 3000),
    ("3 namespaces x 1,000", lambda: _spread(["prod", "staging", "dev"], 3000)),
    ("3,000 namespaces, one each", lambda: [f"ns-{uuid.uuid4().hex[:8]}" for _ in range(3000)]),
    ("cluster-scoped, 1,000", lambda: [""] * 1000),
]


def pods(rng: random.Random, count: int) -> list[str]:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    template = "".join(rng.choices(alphabet, k=10))
    return [f"operator-{template}-{''.join(rng.choices(alphabet, k=5))}" for _ in range(count)]


def split(keys: list[str], members: list[str]) -> list[int]:
    """Objects per member, each object's bucket that of its key."""
    owner = {b: m for m, buckets in assign(members).items() for b in buckets}
    counts = dict.fromkeys(members, 0)
    for key in keys:
        counts[owner[bucket_of_key(key)]] += 1
    return sorted(counts.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(
        f"{'naming':<28} {'N':>2} {'uid min/max':>13} {'worst':>6} "
        f"{'namespace min/max':>18} {'worst':>6}"
    )
    for what, namespaces_of in NAMINGS:
        namespaces = namespaces_of()
        total = len(namespaces)
        for count in (2, 3, 5):
            fair = total / count
            by_uid: list[int] = []
            by_namespace: list[int] = []
            for _ in range(args.trials):
                members = pods(rng, count)
                uids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in namespaces]
                by_uid += split(uids, members)
                by_namespace += split(namespaces, members)
            uid_worst = max(abs(n - fair) / fair for n in by_uid)
            ns_worst = max(abs(n - fair) / fair for n in by_namespace)
            print(
                f"{what:<28} {count:>2} {min(by_uid):>6}/{max(by_uid):<6} {uid_worst:>6.0%} "
                f"{min(by_namespace):>9}/{max(by_namespace):<8} {ns_worst:>6.0%}"
            )
    # The hash's top bits: why the namespace key fails on sequential names.
    distinct = len({fnv1a64(f"team-{i:03d}") >> 58 for i in range(100)})
    print(
        f"\nteam-000..099 fall in {distinct} of 64 buckets by the namespace's FNV-1a-64's top bits"
    )


if __name__ == "__main__":
    main()
