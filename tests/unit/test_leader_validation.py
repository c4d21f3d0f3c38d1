"""What leader election accepts from a Lease, including what the API server
would never store but a proxy, a bug or a future field could hand us; and that
nothing unexpected leaves a leader without a renewer or kills a standby."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any, cast

import pytest

from ansible_operator.kube.client import ApiClient
from ansible_operator.manager.leader import (
    INT32_MAX,
    LEASES,
    LeaderElector,
    MalformedLease,
    current_transitions,
    read_record,
)
from ansible_operator.testing.fake_api import FakeApi

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

NOW = datetime.datetime(2030, 6, 1, 12, 0, 0, tzinfo=datetime.UTC)
FRESH = "2030-06-01T11:59:58.000000Z"


def read(spec: object) -> Any:
    return read_record(spec, now=NOW, default_duration=15.0)


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        ("a string", "spec", "not an object"),
        ({"holderIdentity": 7}, "holderIdentity", "not a string"),
        ({"holderIdentity": ["a"]}, "holderIdentity", "not a string"),
        ({"leaseDurationSeconds": 0}, "leaseDurationSeconds", "not an integer from 1 to 3600"),
        ({"leaseDurationSeconds": -5}, "leaseDurationSeconds", "not an integer"),
        ({"leaseDurationSeconds": 2**31 - 1}, "leaseDurationSeconds", "not an integer"),
        ({"leaseDurationSeconds": "15"}, "leaseDurationSeconds", "not an integer"),
        ({"leaseDurationSeconds": 1.5}, "leaseDurationSeconds", "not an integer"),
        ({"leaseDurationSeconds": True}, "leaseDurationSeconds", "not an integer"),
        ({"renewTime": "9999-12-31T23:59:59.999999Z"}, "renewTime", "more than 15s in the future"),
        ({"renewTime": "2030-06-01T12:00:16.000000Z"}, "renewTime", "more than 15s in the future"),
        (
            {"renewTime": "2030-06-01T12:01:00Z", "leaseDurationSeconds": 30},
            "renewTime",
            "more than 30s in the future",
        ),
        ({"acquireTime": "9999-12-31T23:59:59Z"}, "acquireTime", "in the future"),
        ({"renewTime": "yesterday"}, "renewTime", "not an RFC 3339 time"),
        ({"renewTime": "2030-13-01T00:00:00Z"}, "renewTime", "not an RFC 3339 time"),
        ({"renewTime": "2030-06-01T11:59:58"}, "renewTime", "has no time zone"),
        ({"renewTime": 1900000000}, "renewTime", "not a string"),
    ],
)
def test_a_malformed_lease_names_the_field_and_the_value(
    spec: object, field: str, problem: str
) -> None:
    with pytest.raises(MalformedLease) as raised:
        read(spec)
    assert raised.value.field == field
    assert problem in raised.value.problem
    assert f"field={field} value=" in str(raised.value)


@pytest.mark.parametrize(
    ("spec", "holder", "renewed", "duration"),
    [
        (None, "", None, 15.0),
        ({}, "", None, 15.0),
        ({"holderIdentity": None, "renewTime": FRESH}, "", FRESH, 15.0),
        ({"holderIdentity": "a", "renewTime": FRESH, "leaseDurationSeconds": 4}, "a", FRESH, 4.0),
        ({"holderIdentity": "a", "acquireTime": FRESH}, "a", FRESH, 15.0),
        # Long past is fine: it only says the lease expired.
        ({"holderIdentity": "a", "renewTime": "0001-01-01T00:00:00Z"}, "a", "0001-01-01", 15.0),
        # A little clock skew is fine.
        ({"holderIdentity": "a", "renewTime": "2030-06-01T12:00:10Z"}, "a", "2030-06-01", 15.0),
        ({"renewTime": "2030-06-01T14:00:00+02:00"}, "", "2030-06-01T12:00", 15.0),
    ],
)
def test_a_sane_lease_is_read(
    spec: object, holder: str, renewed: str | None, duration: float
) -> None:
    record = read(spec)
    assert record.holder == holder
    assert record.duration == duration
    if renewed is None:
        assert record.renewed is None
    else:
        moment = datetime.datetime.fromisoformat(renewed.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        assert record.renewed is not None and record.renewed >= moment


def test_our_own_longer_duration_is_accepted_from_the_lease() -> None:
    record = read_record({"leaseDurationSeconds": 7200}, now=NOW, default_duration=7200.0)
    assert record.duration == 7200.0


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(MalformedLease) as raised:
        read({"holderIdentity": ["x" * 10_000]})
    assert len(str(raised.value)) < 300
    assert "chars)" in str(raised.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 0), (3, 3), (-1, 0), ("3", 0), (True, 0), (INT32_MAX, INT32_MAX), (2**40, 0)],
)
def test_transitions_that_are_not_a_count_start_over(value: object, expected: int) -> None:
    assert current_transitions({"leaseTransitions": value}) == expected


class Surprise:
    """Once `on`, every read of the Lease raises something no one planned for."""

    def __init__(self) -> None:
        self.on = False
        self.gets = 0

    def __call__(self, _resource: Any, _body: Any) -> None:
        self.gets += 1
        if self.on:
            raise KeyError("surprise")


def lease_held_by(holder: str) -> tuple[FakeApi, Surprise]:
    """An API holding a Lease `holder` renewed just now, and its surprise."""
    api = FakeApi()
    renewed = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    api.put(
        LEASES,
        {
            "metadata": {"name": "lease", "namespace": "ns"},
            "spec": {"holderIdentity": holder, "renewTime": renewed},
        },
    )
    surprise = Surprise()
    api.before("get", surprise)
    return api, surprise


def elector(api: FakeApi, identity: str) -> LeaderElector:
    return LeaderElector(
        cast(ApiClient, api),
        name="lease",
        namespace="ns",
        identity=identity,
        lease_duration=60.0,
        renew_deadline=50.0,
        retry_period=0.01,
    )


async def test_an_unexpected_error_in_the_renewer_ends_leadership_loudly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, surprise = lease_held_by("me")
    leader = elector(api, "me")
    await asyncio.wait_for(leader.acquire(), 10)
    surprise.on = True
    await asyncio.wait_for(leader.lost.wait(), 10)
    [line] = [r for r in caplog.records if r.getMessage().startswith("leadership lost")]
    assert line.levelno == logging.ERROR
    assert "lease=ns/lease identity=me reason=the renewer failed" in line.getMessage()


async def test_an_unexpected_error_does_not_kill_a_standby(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, surprise = lease_held_by("other")
    surprise.on = True
    acquiring = asyncio.create_task(elector(api, "me").acquire())
    try:
        async with asyncio.timeout(10):
            # Three reads means it retried twice after the first error.
            while surprise.gets < 3 and not acquiring.done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert not acquiring.done(), acquiring
        assert any("lease acquisition failed" in r.getMessage() for r in caplog.records)
    finally:
        acquiring.cancel()
