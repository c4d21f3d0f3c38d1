"""Which member of the ring reconciles which bucket: rendezvous (highest
random weight) hashing. Each bucket goes to the member with the highest
weight for it; every replica computes the same answer from the same member
names, with nothing to agree on but the Leases. A member that joins takes
from each other member only the buckets it now outweighs them on (~1/N of
the space); one that leaves gives its buckets to the next highest weights,
spread over the rest. Chosen over a ring of virtual nodes because with 64
buckets the whole computation is 64 x members hashes and needs no tuning;
bench/sharding.py and tests/unit/test_shard_assignment.py measure balance
and movement.
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
    owned: dict[str, set[int]] = {name: set() for name in names}
    if not names:
        return {}
    for bucket in range(buckets):
        winner = max(names, key=lambda name: (weight(name, bucket), name))
        owned[winner].add(bucket)
    return {name: frozenset(share) for name, share in owned.items()}
