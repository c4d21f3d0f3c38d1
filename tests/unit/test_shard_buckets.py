"""The hash space as the API server's sharded lists see it (sharding/buckets.py)."""

from __future__ import annotations

import pytest

from ansible_operator.sharding.buckets import (
    BUCKETS,
    bucket_of,
    fnv1a64,
    format_buckets,
    parse_buckets,
    shard_selector,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0xCBF29CE484222325), ("a", 0xAF63DC4C8601EC8C), ("foobar", 0x85944171F73967E8)],
)
def test_the_hash_is_64_bit_fnv_1a(text: str, expected: int) -> None:
    assert fnv1a64(text) == expected


def test_a_namespace_lands_in_the_bucket_its_hash_range_covers() -> None:
    for namespace in ("default", "team-a", "kube-system", ""):
        bucket = bucket_of(namespace)
        width = (1 << 64) // BUCKETS
        assert bucket * width <= fnv1a64(namespace) < (bucket + 1) * width


def test_a_selector_merges_consecutive_buckets_into_one_range() -> None:
    width = (1 << 64) // BUCKETS
    selector = shard_selector({0, 1, 2, 5})
    assert selector == (
        "shardRange(object.metadata.namespace, '0x0000000000000000', "
        f"'0x{3 * width:016x}') || "
        f"shardRange(object.metadata.namespace, '0x{5 * width:016x}', '0x{6 * width:016x}')"
    )


def test_the_last_bucket_ends_at_two_to_the_64_written_out() -> None:
    selector = shard_selector(range(BUCKETS))
    assert selector == (
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"
    )


def test_no_bucket_is_a_range_the_server_accepts_and_nothing_falls_in() -> None:
    assert shard_selector(()) == (
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000001')"
    )


def test_held_buckets_read_back_as_written() -> None:
    held = frozenset({0, 1, 2, 3, 9, 12, 13, 63})
    assert format_buckets(held) == "0-3,9,12-13,63"
    assert parse_buckets(format_buckets(held)) == held
    assert parse_buckets("") == frozenset()


@pytest.mark.parametrize("text", ["64", "5-3", "x", "-1", "1-99"])
def test_a_bad_annotation_is_refused_with_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError):
        parse_buckets(text)
