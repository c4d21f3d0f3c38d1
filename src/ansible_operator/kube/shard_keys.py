"""Which share of a ring of replicas an object belongs to, as the API server's
sharded lists and watches see it (KEP-5866, k8s.io/apimachinery/pkg/sharding):
a key of the object hashed with 64-bit FNV-1a, and the hash space `[0, 2^64)`
cut into `BUCKETS` equal ranges (`[start, end)`), the buckets.

120 buckets: 120 is divisible by 2, 3, 4, 5, 6, 8, 10 and 12, so that many
replicas hold exactly equal numbers of buckets (with 64, five replicas held
12 or 13: a sixth of them 6 % short before any spread of the objects); few
enough that a replica's selector stays a few kB (at most 60 ranges, and as
many label values for its dependents).

The key is the object's `metadata.uid` (`object.metadata.uid`, which
`shardSelector` accepts beside `object.metadata.namespace`). Chosen over the
namespace because it is uniform whatever the names: FNV-1a moves its top bits
hardly at all when only a name's last characters differ, so `team-000` ...
`team-099` all hash into one bucket, and no key of the namespace splits
one namespace holding thousands of objects. A uid is a random UUID (v4): the
36 characters differ from the first, so the top bits are as good as random
(tests/unit/test_shard_keys.py measures it for names as people give them).

A dependent (what an owner's runs create) is not keyed by its own uid but
follows its owner: the proxy labels it `OWNER_SHARD_LABEL=<its owner's bucket>`
(proxy/rules/owner_marks.py), and the replicas watch dependents by that label
(`owner_shard_selector`), so that a dependent's events reach the replica
reconciling its owner, on any cluster, with the gate on or off.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Literal

BUCKETS = 120
SPACE = 1 << 64
SHARD_KEY = "object.metadata.uid"
OWNER_SHARD_LABEL = "ansible-operator.io/owner-shard"
# A label value no bucket has: the selector of an empty share (`in ()` is refused).
NO_BUCKET = "none"

# What an informer keys its objects by: their own uid (the watches' kinds), or
# their owner's bucket as labelled (the dependents' kinds).
Follows = Literal["self", "owner"]

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
def bucket_of_key(key: str) -> int:
    """The bucket of a key (a uid): the one whose range holds its hash."""
    return (fnv1a64(key) * BUCKETS) >> 64


def bucket_start(bucket: int) -> int:
    """Where `bucket`'s range of hashes begins (`BUCKETS`: 2^64, the end of the
    last): the least hash `bucket_of_key` puts in it."""
    return -((-bucket * SPACE) // BUCKETS)


def uid_of(obj: Mapping[str, Any] | None) -> str:
    metadata = (obj or {}).get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
    return uid if isinstance(uid, str) else ""


def object_bucket(obj: Mapping[str, Any] | None) -> int:
    """The bucket of an object keyed by itself: its uid's."""
    return bucket_of_key(uid_of(obj))


def owner_bucket(obj: Mapping[str, Any] | None) -> int | None:
    """The bucket a dependent's label says its owner is in (None: no such label)."""
    metadata = (obj or {}).get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    value = labels.get(OWNER_SHARD_LABEL) if isinstance(labels, Mapping) else None
    if not isinstance(value, str) or not value.isdigit():
        return None
    bucket = int(value)
    return bucket if bucket < BUCKETS else None


def owner_shard_label(owner_uid: str) -> str:
    """The value of `OWNER_SHARD_LABEL` on what a run of the owner with this uid creates."""
    return str(bucket_of_key(owner_uid))


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
    No bucket: a range of one hash value (the parameter cannot be empty)."""
    runs = ranges(buckets)
    if not runs:
        return f"shardRange({SHARD_KEY}, '{_hex(0)}', '{_hex(1)}')"
    return " || ".join(
        f"shardRange({SHARD_KEY}, '{_hex(bucket_start(first))}', '{_hex(bucket_start(last + 1))}')"
        for first, last in runs
    )


def owner_shard_selector(buckets: Iterable[int]) -> str:
    """The label selector of the dependents whose owners are in `buckets`: every
    labelled one when that is all of them, none when there are none."""
    held = sorted(set(buckets))
    if len(held) == BUCKETS:
        return OWNER_SHARD_LABEL
    values = ",".join(str(bucket) for bucket in held) or NO_BUCKET
    return f"{OWNER_SHARD_LABEL} in ({values})"
