"""The hash space the ring splits, as the API server's sharded lists and
watches see it (KEP-5866, k8s.io/apimachinery/pkg/sharding): an object's key
(here its namespace, "" when cluster-scoped) hashed with 64-bit FNV-1a, and
ranges `[start, end)` of `[0, 2^64)`.

The space is cut into `BUCKETS` equal buckets, the unit that moves between
replicas: a replica's share is a set of buckets, its selector the merged
ranges of those buckets. Few enough that a selector stays short (at most
BUCKETS/2 ranges), enough that three replicas get near-equal shares.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

BUCKET_BITS = 6
BUCKETS = 1 << BUCKET_BITS
SPACE = 1 << 64
BUCKET_WIDTH = SPACE >> BUCKET_BITS
SHARD_KEY = "object.metadata.namespace"

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = SPACE - 1


def fnv1a64(text: str) -> int:
    """The API server's hash of a key (apimachinery's `HashField`)."""
    value = _FNV_OFFSET
    for byte in text.encode():
        value = ((value ^ byte) * _FNV_PRIME) & _MASK
    return value


@functools.lru_cache(maxsize=65536)
def bucket_of(namespace: str | None) -> int:
    """The bucket of every object of `namespace` (None or "": cluster-scoped)."""
    return fnv1a64(namespace or "") >> (64 - BUCKET_BITS)


def _hex(bound: int) -> str:
    # The server's parser takes exactly 16 hex digits, or 2^64 written out.
    return "0x10000000000000000" if bound == SPACE else f"0x{bound:016x}"


def ranges(buckets: Iterable[int]) -> list[tuple[int, int]]:
    """Runs of consecutive buckets, as `(first, last)` inclusive."""
    runs: list[tuple[int, int]] = []
    for bucket in sorted(set(buckets)):
        if runs and runs[-1][1] == bucket - 1:
            runs[-1] = (runs[-1][0], bucket)
        else:
            runs.append((bucket, bucket))
    return runs


def shard_selector(buckets: Iterable[int]) -> str:
    """The `shardSelector` of a list or watch that returns only `buckets`' objects.
    No bucket: a range no namespace falls in (hash 0 has no known preimage among
    names), since the parameter cannot be empty."""
    runs = ranges(buckets)
    if not runs:
        return f"shardRange({SHARD_KEY}, '{_hex(0)}', '{_hex(1)}')"
    return " || ".join(
        f"shardRange({SHARD_KEY}, '{_hex(first * BUCKET_WIDTH)}', "
        f"'{_hex((last + 1) * BUCKET_WIDTH)}')"
        for first, last in runs
    )


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
