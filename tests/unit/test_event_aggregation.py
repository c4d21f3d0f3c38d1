"""Events aggregate as Kubernetes' own recorders do: a failure retried six times
is one Warning Event with count 6, not six Events; a different message, reason
or object is its own Event; an Event the server dropped is written anew."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ansible_operator.kube.client import ApiClient
from ansible_operator.kube.config import KubeConfig
from ansible_operator.reconciler.events import EventRecorder, record_event
from fake_kube_api import FakeKubeAPI, serve

MEMCACHED = {
    "apiVersion": "cache.example.com/v1",
    "kind": "Memcached",
    "metadata": {"name": "cache", "namespace": "shop", "uid": "u-1", "resourceVersion": "7"},
}
DENIED = (
    'deployments.apps is forbidden: User "system:serviceaccount:demo-system:demo" '
    'cannot create resource "deployments" in API group "apps" in the namespace "shop"'
)


@pytest.fixture
def kube() -> Iterator[FakeKubeAPI]:
    with serve() as api:
        yield api


@pytest.fixture
async def api(kube: FakeKubeAPI) -> AsyncIterator[ApiClient]:
    async with ApiClient(KubeConfig(server=kube.url, ssl=False)) as client:
        yield client


def events(kube: FakeKubeAPI) -> list[dict[str, Any]]:
    return [obj for (plural, _, _), obj in kube.objects.items() if plural == "events"]


async def test_a_repeated_event_is_counted_not_copied(kube: FakeKubeAPI, api: ApiClient) -> None:
    for _ in range(6):
        await record_event(api, MEMCACHED, "Failed", DENIED, warning=True)

    [event] = events(kube)
    assert event["count"] == 6
    assert event["type"] == "Warning"
    assert event["reason"] == "Failed"
    assert event["message"] == DENIED
    assert event["involvedObject"]["name"] == "cache"
    assert event["lastTimestamp"] >= event["firstTimestamp"]


async def test_another_message_reason_or_object_is_its_own_event(
    kube: FakeKubeAPI, api: ApiClient
) -> None:
    other = {**MEMCACHED, "metadata": {**MEMCACHED["metadata"], "name": "other", "uid": "u-2"}}
    await record_event(api, MEMCACHED, "Failed", DENIED, warning=True)
    await record_event(api, MEMCACHED, "Failed", "another failure", warning=True)
    await record_event(api, MEMCACHED, "RunTimeout", DENIED, warning=True)
    await record_event(api, other, "Failed", DENIED, warning=True)
    await record_event(api, MEMCACHED, "Failed", DENIED, warning=True)

    counts = sorted(
        (e["involvedObject"]["name"], e["reason"], e["message"][:7], e["count"])
        for e in events(kube)
    )
    assert counts == [
        ("cache", "Failed", "another", 1),
        ("cache", "Failed", "deploym", 2),
        ("cache", "RunTimeout", "deploym", 1),
        ("other", "Failed", "deploym", 1),
    ]


async def test_an_event_the_server_no_longer_has_is_written_anew(
    kube: FakeKubeAPI, api: ApiClient
) -> None:
    recorder = EventRecorder(api)
    await recorder.record(MEMCACHED, "Failed", DENIED, warning=True)
    kube.objects.clear()  # Events expire (an hour by default)

    await recorder.record(MEMCACHED, "Failed", DENIED, warning=True)
    await recorder.record(MEMCACHED, "Failed", DENIED, warning=True)

    [event] = events(kube)
    assert event["count"] == 2


async def test_the_oldest_events_are_forgotten_past_the_limit(
    kube: FakeKubeAPI, api: ApiClient
) -> None:
    recorder = EventRecorder(api, remembered=2)
    for message in ("one", "two", "three", "one"):
        await recorder.record(MEMCACHED, "Failed", message, warning=True)

    assert sorted((e["message"], e["count"]) for e in events(kube)) == [
        ("one", 1),
        ("one", 1),
        ("three", 1),
        ("two", 1),
    ]
