"""Rendezvous assignment of the buckets to the ring's members (sharding/assignment.py):
every bucket to one member, the same from any replica, and little moved when
the membership changes."""

from __future__ import annotations

from ansible_operator.sharding.assignment import assign
from ansible_operator.sharding.buckets import BUCKETS

PODS = [f"operator-7d9f8c6b5-{suffix}" for suffix in ("x2k4p", "m9q7r", "b5t8w", "z3n6v")]


def _owner(assignment: dict[str, frozenset[int]]) -> dict[int, str]:
    owners: dict[int, str] = {}
    for member, buckets in assignment.items():
        for bucket in buckets:
            assert bucket not in owners, f"bucket {bucket} assigned twice"
            owners[bucket] = member
    return owners


def test_every_bucket_goes_to_exactly_one_member_whatever_the_order() -> None:
    three = assign(PODS[:3])
    assert set(_owner(three)) == set(range(BUCKETS))
    assert assign(reversed(PODS[:3])) == three


def test_three_members_get_near_equal_shares() -> None:
    shares = sorted(len(buckets) for buckets in assign(PODS[:3]).values())
    assert shares[0] >= BUCKETS // 3 - 8, shares
    assert shares[-1] <= BUCKETS // 3 + 8, shares


def test_a_member_that_joins_takes_only_from_others_and_about_its_share() -> None:
    before = _owner(assign(PODS[:3]))
    after = _owner(assign(PODS))
    moved = [bucket for bucket in before if before[bucket] != after[bucket]]
    assert all(after[bucket] == PODS[3] for bucket in moved)
    assert BUCKETS // 4 - 8 <= len(moved) <= BUCKETS // 4 + 8


def test_a_member_that_leaves_moves_only_its_own_buckets() -> None:
    before = _owner(assign(PODS))
    after = _owner(assign(PODS[1:]))
    moved = [bucket for bucket in before if before[bucket] != after[bucket]]
    assert moved and all(before[bucket] == PODS[0] for bucket in moved)


def test_no_member_no_assignment_and_one_member_holds_everything() -> None:
    assert assign([]) == {}
    assert assign(PODS[:1]) == {PODS[0]: frozenset(range(BUCKETS))}
