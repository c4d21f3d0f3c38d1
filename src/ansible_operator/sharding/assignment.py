"""Which member of the ring reconciles which bucket: rendezvous (highest
random weight) hashing with bounded loads. Every (member, bucket) pair has a
weight; the pairs are taken heaviest first, and each gives its bucket to its
member unless the bucket is already given or the member has its fill:
BUCKETS/N buckets, rounded down, or up for the first BUCKETS mod N members to
reach it. Every replica computes the same answer from the same member names,
with nothing to agree on but the Leases.

Why bounded: plain rendezvous gives each bucket to its heaviest member, and
the shares of the buckets then vary by the luck of the names (with 64
buckets, three replicas got 17/22/25, five 8 to 17), while the key
(kube/shard_keys.py) is uniform: the buckets' split would be the imbalance.
Bounded, every member holds BUCKETS/N buckets to within one (exactly, for
the N that divide 120), so each replica's share of the objects is 1/N but
for the objects' own spread over the buckets. A member that joins still
takes about 1/(N+1) of the buckets, mostly those it outweighs others on; one
that leaves gives its buckets out over the rest, and a few move between the
others (tests/unit/test_shard_assignment.py measures balance and movement).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ansible_operator.sharding.buckets import BUCKETS


def weight(member: str, bucket: int) -> int:
    # blake2b, not FNV: FNV mixes short, similar names (replica-0, replica-1) poorly.
    digest = hashlib.blake2b(f"{bucket}/{member}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assign(members: Iterable[str], buckets: int = BUCKETS) -> dict[str, frozenset[int]]:
    """Each member's buckets (every member present, with none if it wins none)."""
    names = sorted(set(members))
    if not names:
        return {}
    owned: dict[str, set[int]] = {name: set() for name in names}
    floor, extra = divmod(buckets, len(names))
    pairs = sorted(
        ((weight(name, bucket), name, bucket) for name in names for bucket in range(buckets)),
        reverse=True,
    )
    given: set[int] = set()
    topped = 0  # members holding floor + 1
    for _weight, name, bucket in pairs:
        if bucket in given:
            continue
        held = len(owned[name])
        if held < floor or (held == floor and topped < extra):
            owned[name].add(bucket)
            given.add(bucket)
            topped += held == floor
            if len(given) == buckets:
                break
    return {name: frozenset(share) for name, share in owned.items()}
