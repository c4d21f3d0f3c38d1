"""The hash space the ring splits, in buckets (the key and its hash:
kube/shard_keys.py, where the proxy and the informers read them too).

The space is cut into `BUCKETS` equal buckets, the unit that moves between
replicas: a replica's share is a set of buckets, its selector the merged
ranges of those buckets. Few enough that a selector stays short (at most
BUCKETS/2 ranges, and as many label values for the dependents), enough that
the assignment (assignment.py) can give N replicas shares within one bucket
of 120/N each (exactly 120/N for N = 2, 3, 4, 5, 6, 8, 10, 12).
"""

from __future__ import annotations

from collections.abc import Iterable

from ansible_operator.kube.shard_keys import (
    BUCKETS,
    SHARD_KEY,
    bucket_of_key,
    bucket_start,
    fnv1a64,
    object_bucket,
    owner_shard_selector,
    ranges,
    shard_selector,
)

__all__ = [
    "BUCKETS",
    "SHARD_KEY",
    "bucket_of_key",
    "bucket_start",
    "fnv1a64",
    "format_buckets",
    "object_bucket",
    "owner_shard_selector",
    "parse_buckets",
    "ranges",
    "shard_selector",
]


def format_buckets(buckets: Iterable[int]) -> str:
    """'0-5,9,12-20': a Lease annotation's worth."""
    return ",".join(
        str(first) if first == last else f"{first}-{last}" for first, last in ranges(buckets)
    )


def parse_buckets(text: str) -> frozenset[int]:
    """The inverse of `format_buckets`; ValueError names what is wrong."""
    buckets: set[int] = set()
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        first, _, last = part.partition("-")
        low, high = int(first), int(last or first)
        if not 0 <= low <= high < BUCKETS:
            raise ValueError(f"bucket range {part!r} is outside 0-{BUCKETS - 1}")
        buckets.update(range(low, high + 1))
    return frozenset(buckets)
