"""Whoever can write the leader Lease cannot leave two controllers running,
a leader without a renewer, or a standby crashed (issue 25, item 5).

Each attack writes the Lease with the kubernetes client, as another process
with RBAC on Leases would, while a LeaderElector runs in-process against the
real API server. The leaders get a renew deadline far longer than the tests
wait: if they stop, it is because they read the Lease, not because the
deadline passed.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import load_config
from ansible_operator.manager.leader import LeaderElector

pytestmark = pytest.mark.cluster

LEASE = "tampered"
END_OF_TIME = "9999-12-31T23:59:59.999999Z"
PATIENT = {"lease_duration": 120.0, "renew_deadline": 90.0, "retry_period": 0.2}
# A standby's lease duration long enough that no stall of a busy machine
# between two of the holder's renewals looks like a dead holder.
HOLDER_WATCHED = {"lease_duration": 5.0, "renew_deadline": 4.0, "retry_period": 0.2}
WAIT = 60.0  # well below PATIENT's renew deadline


@pytest.fixture
async def api(kube_cluster: Cluster) -> AsyncIterator[ApiClient]:
    async with ApiClient(load_config(kube_cluster.kubeconfig)) as api:
        yield api


@pytest.fixture
def leader_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="ansible_operator.leader")
    return caplog


def elector(api: ApiClient, namespace: str, identity: str, **durations: float) -> LeaderElector:
    return LeaderElector(api, name=LEASE, namespace=namespace, identity=identity, **durations)


async def write_lease(kube_api: client.ApiClient, namespace: str, **spec: Any) -> None:
    """Merge `spec` into the Lease, creating it if needed."""
    leases = client.CoordinationV1Api(kube_api)
    body = {"metadata": {"name": LEASE}, "spec": spec}
    try:
        await asyncio.to_thread(leases.patch_namespaced_lease, LEASE, namespace, body)
    except client.ApiException as error:
        if error.status != 404:
            raise
        await asyncio.to_thread(leases.create_namespaced_lease, namespace, body)


async def read_lease(kube_api: client.ApiClient, namespace: str) -> Any:
    leases = client.CoordinationV1Api(kube_api)
    return await asyncio.to_thread(leases.read_namespaced_lease, LEASE, namespace)


def now_text() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def wait_lost(leader: LeaderElector, caplog: pytest.LogCaptureFixture) -> str:
    """The leader's "leadership lost" line, once `lost` is set."""
    try:
        await asyncio.wait_for(leader.lost.wait(), WAIT)
    except TimeoutError:
        logged = "\n".join(record.getMessage() for record in caplog.records)
        raise AssertionError(
            f"the leader still leads after {WAIT:g}s; it logged:\n{logged}"
        ) from None
    return logged_line(caplog, "leadership lost")


def logged_line(caplog: pytest.LogCaptureFixture, start: str) -> str:
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(start)]
    assert len(lines) == 1, f"expected one {start!r} line, got {lines}"
    return lines[0]


async def test_a_renew_time_at_the_end_of_time_makes_the_leader_give_up(
    api: ApiClient,
    kube_api: client.ApiClient,
    kube_namespace: str,
    leader_log: pytest.LogCaptureFixture,
) -> None:
    leader = elector(api, kube_namespace, "leader", **PATIENT)
    await asyncio.wait_for(leader.acquire(), WAIT)
    try:
        await write_lease(kube_api, kube_namespace, renewTime=END_OF_TIME)
        line = await wait_lost(leader, leader_log)
        assert f"lease={kube_namespace}/{LEASE}" in line
        assert f"field=renewTime value='{END_OF_TIME}'" in line
        assert "in the future" in line
    finally:
        await leader.release()


async def test_the_leader_stops_at_once_when_another_identity_takes_the_lease(
    api: ApiClient,
    kube_api: client.ApiClient,
    kube_namespace: str,
    leader_log: pytest.LogCaptureFixture,
) -> None:
    leader = elector(api, kube_namespace, "leader", **PATIENT)
    await asyncio.wait_for(leader.acquire(), WAIT)
    try:
        await write_lease(kube_api, kube_namespace, holderIdentity="intruder", renewTime=now_text())
        line = await wait_lost(leader, leader_log)
        assert "held by 'intruder'" in line
        # The old leader gave up; it did not take the Lease back.
        await leader.release()
        assert (await read_lease(kube_api, kube_namespace)).spec.holder_identity == "intruder"
    finally:
        await leader.release()


async def test_a_leader_whose_lease_is_deleted_gives_up(
    api: ApiClient,
    kube_api: client.ApiClient,
    kube_namespace: str,
    leader_log: pytest.LogCaptureFixture,
) -> None:
    leader = elector(api, kube_namespace, "leader", **PATIENT)
    await asyncio.wait_for(leader.acquire(), WAIT)
    try:
        leases = client.CoordinationV1Api(kube_api)
        await asyncio.to_thread(leases.delete_namespaced_lease, LEASE, kube_namespace)
        # Another replica may create it anew at once: the old leader must not go on.
        line = await wait_lost(leader, leader_log)
        assert "the lease was deleted" in line
    finally:
        await leader.release()


async def test_a_standby_facing_a_far_future_lease_keeps_retrying_then_takes_it_over(
    api: ApiClient,
    kube_api: client.ApiClient,
    kube_namespace: str,
    leader_log: pytest.LogCaptureFixture,
) -> None:
    await write_lease(
        kube_api,
        kube_namespace,
        holderIdentity="intruder",
        leaseDurationSeconds=15,
        acquireTime=END_OF_TIME,
        renewTime=END_OF_TIME,
    )
    standby = elector(
        api, kube_namespace, "standby", lease_duration=2.0, renew_deadline=1.5, retry_period=0.2
    )
    try:
        # It does not crash and does not wait for year 9999: after its own
        # lease duration of seeing the Lease unchanged, it takes it over.
        await asyncio.wait_for(standby.acquire(), WAIT)
        warning = logged_line(leader_log, "lease is malformed")
        assert f"lease={kube_namespace}/{LEASE}" in warning
        assert "holder='intruder'" in warning
        assert f"value='{END_OF_TIME}'" in warning
        lease = (await read_lease(kube_api, kube_namespace)).spec
        assert lease.holder_identity == "standby"
        assert lease.renew_time < datetime.datetime.now(datetime.UTC) + datetime.timedelta(
            minutes=1
        )
        assert lease.lease_transitions >= 1
    finally:
        await standby.release()


async def test_a_standby_does_not_take_a_lease_its_holder_keeps_renewing(
    api: ApiClient,
    kube_api: client.ApiClient,
    kube_namespace: str,
    leader_log: pytest.LogCaptureFixture,
) -> None:
    """The other side of the takeover above: a malformed Lease that keeps changing
    (its holder is alive) is never taken."""
    await write_lease(kube_api, kube_namespace, holderIdentity="intruder", renewTime=END_OF_TIME)
    standby = elector(api, kube_namespace, "standby", **HOLDER_WATCHED)
    acquiring = asyncio.create_task(standby.acquire())
    loop = asyncio.get_running_loop()
    try:
        # The holder renews, each time with another far-future renewTime, for
        # more than twice the standby's lease duration.
        until = loop.time() + 2.5 * HOLDER_WATCHED["lease_duration"]
        renewals = 0
        while loop.time() < until:
            renewals += 1
            await write_lease(
                kube_api, kube_namespace, renewTime=f"9999-12-31T23:59:{renewals % 60:02}.000000Z"
            )
            await asyncio.sleep(0.2)
            assert not acquiring.done(), acquiring
        assert (await read_lease(kube_api, kube_namespace)).spec.holder_identity == "intruder"
        assert logged_line(leader_log, "lease is malformed")
    finally:
        acquiring.cancel()
        await standby.release()
