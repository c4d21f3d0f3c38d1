"""A standby takes the Lease as soon as it may: at once when the leader
releases it (its watch of the Lease wakes it), and at the moment a dead
leader's lease expires, not at the next retry period after. On the fake clock."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import cast

import pytest

from ansible_operator.kube.client import ApiClient, ApiError
from ansible_operator.manager.leader import LEASES, LeaderElector
from ansible_operator.testing.fake_api import FakeApi

pytestmark = pytest.mark.looptime

LEASE_SECONDS = 10.0
RETRY_SECONDS = 7.0


def renewed_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def holding(holder: str | None) -> FakeApi:
    api = FakeApi()
    api.put(
        LEASES,
        {
            "metadata": {"name": "lease", "namespace": "ns"},
            "spec": {
                "holderIdentity": holder,
                "renewTime": renewed_now(),
                "leaseDurationSeconds": int(LEASE_SECONDS),
            },
        },
    )
    return api


def standby(api: FakeApi) -> LeaderElector:
    return LeaderElector(
        cast(ApiClient, api),
        name="lease",
        namespace="ns",
        identity="standby",
        lease_duration=LEASE_SECONDS,
        renew_deadline=8.0,
        retry_period=RETRY_SECONDS,
    )


async def test_a_released_lease_is_taken_as_soon_as_the_watch_says_so() -> None:
    api = holding("leader")
    elector = standby(api)
    acquiring = asyncio.create_task(elector.acquire())
    await asyncio.sleep(1)
    assert not acquiring.done()  # held, and fresh
    released = api.held(LEASES, "lease", "ns")
    assert released is not None
    released["spec"]["holderIdentity"] = None  # what a leader's clean exit writes
    api.put(LEASES, released)
    api.send(LEASES, "MODIFIED", released)
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(acquiring, RETRY_SECONDS)
    assert asyncio.get_running_loop().time() - started < 0.5  # not the next retry
    held = api.held(LEASES, "lease", "ns")
    assert held is not None and held["spec"]["holderIdentity"] == "standby"
    elector.stop_renewing()


async def test_a_dead_leaders_lease_is_taken_when_it_expires_not_a_retry_later() -> None:
    api = holding("dead-leader")  # renewed once, and never again
    elector = standby(api)
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(elector.acquire(), 3 * LEASE_SECONDS)
    took = asyncio.get_running_loop().time() - started
    # Unchanged for a lease duration by the standby's clock; polling every retry
    # period would have taken it at 14 s.
    assert LEASE_SECONDS <= took < LEASE_SECONDS + 0.5
    elector.stop_renewing()


async def test_without_watch_on_leases_a_standby_polls_every_retry_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ansible_operator.leader")
    api = holding("leader")
    api.end_watch(LEASES, ApiError(403, "Forbidden", "cannot watch leases"))
    elector = standby(api)
    acquiring = asyncio.create_task(elector.acquire())
    await asyncio.sleep(1)
    released = api.held(LEASES, "lease", "ns")
    assert released is not None
    released["spec"]["holderIdentity"] = None
    api.put(LEASES, released)
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(acquiring, 2 * RETRY_SECONDS)
    assert asyncio.get_running_loop().time() - started <= RETRY_SECONDS
    assert any("not watching the lease" in r.getMessage() for r in caplog.records)
    elector.stop_renewing()
