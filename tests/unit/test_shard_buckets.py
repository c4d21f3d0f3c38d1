"""The hash space as the API server's sharded lists see it (kube/shard_keys.py,
sharding/buckets.py): an object's uid hashed with FNV-1a-64, the space cut
into 120 equal ranges, its bucket the one its hash is in; a dependent's bucket
is its owner's, as labelled."""

from __future__ import annotations

import random

import pytest

from ansible_operator.kube.shard_keys import (
    OWNER_SHARD_LABEL,
    object_bucket,
    owner_bucket,
    owner_shard_label,
)
from ansible_operator.sharding.buckets import (
    BUCKETS,
    bucket_of_key,
    bucket_start,
    fnv1a64,
    format_buckets,
    owner_shard_selector,
    parse_buckets,
    shard_selector,
)

UID = "6f1c2a9e-3b7d-4e0a-9c55-0d8e2f7a1b34"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0xCBF29CE484222325), ("a", 0xAF63DC4C8601EC8C), ("foobar", 0x85944171F73967E8)],
)
def test_the_hash_is_64_bit_fnv_1a(text: str, expected: int) -> None:
    assert fnv1a64(text) == expected


def test_an_object_lands_in_the_bucket_its_uid_s_hash_range_covers() -> None:
    obj = {"metadata": {"name": "a", "namespace": "team-001", "uid": UID}}
    bucket = object_bucket(obj)
    assert bucket == bucket_of_key(UID)
    assert bucket_start(bucket) <= fnv1a64(UID) < bucket_start(bucket + 1)


def test_the_ranges_tile_the_space_as_the_buckets_do() -> None:
    """Each range's bounds are where the bucket arithmetic changes bucket, so
    what the server keeps for a selector is exactly what the replica keeps."""
    assert bucket_start(0) == 0 and bucket_start(BUCKETS) == 1 << 64
    for bucket in range(BUCKETS):
        first, end = bucket_start(bucket), bucket_start(bucket + 1)
        assert (first * BUCKETS) >> 64 == bucket
        assert ((end - 1) * BUCKETS) >> 64 == bucket
    rng = random.Random(40)
    for _ in range(1000):
        value = rng.getrandbits(64)
        bucket = (value * BUCKETS) >> 64
        assert bucket_start(bucket) <= value < bucket_start(bucket + 1)


def test_a_dependent_s_bucket_is_the_one_its_label_names() -> None:
    labelled = {"metadata": {"labels": {OWNER_SHARD_LABEL: owner_shard_label(UID)}}}
    assert owner_bucket(labelled) == bucket_of_key(UID)
    assert owner_bucket({"metadata": {}}) is None
    assert owner_bucket({"metadata": {"labels": {OWNER_SHARD_LABEL: "120"}}}) is None
    assert owner_bucket({"metadata": {"labels": {OWNER_SHARD_LABEL: "x"}}}) is None


def test_a_selector_merges_consecutive_buckets_into_one_range_of_uids() -> None:
    selector = shard_selector({0, 1, 2, 5})
    assert selector == (
        "shardRange(object.metadata.uid, '0x0000000000000000', "
        f"'0x{bucket_start(3):016x}') || "
        f"shardRange(object.metadata.uid, '0x{bucket_start(5):016x}', "
        f"'0x{bucket_start(6):016x}')"
    )


def test_the_last_bucket_ends_at_two_to_the_64_written_out() -> None:
    selector = shard_selector(range(BUCKETS))
    assert selector == (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
    )


def test_no_bucket_is_a_range_the_server_accepts() -> None:
    assert shard_selector(()) == (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"
    )


def test_the_dependents_selector_names_the_owners_buckets() -> None:
    assert owner_shard_selector({3, 1, 40}) == f"{OWNER_SHARD_LABEL} in (1,3,40)"
    assert owner_shard_selector(range(BUCKETS)) == OWNER_SHARD_LABEL  # every labelled one
    assert owner_shard_selector(()) == f"{OWNER_SHARD_LABEL} in (none)"  # `in ()` is refused


def test_held_buckets_read_back_as_written() -> None:
    held = frozenset({0, 1, 2, 3, 9, 12, 13, 119})
    assert format_buckets(held) == "0-3,9,12-13,119"
    assert parse_buckets(format_buckets(held)) == held
    assert parse_buckets("") == frozenset()


@pytest.mark.parametrize("text", ["120", "5-3", "x", "-1", "1-199"])
def test_a_bad_annotation_is_refused_with_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError):
        parse_buckets(text)
