"""What kube-apiserver does with a shard selector, with real objects: with
ShardedListAndWatch on, a LIST or WATCH with `shardSelector` keeps only the
objects whose field (the namespace, or the uid, the operator's key) hashes
(64-bit FNV-1a) into the range, and the LIST says so in `metadata.shardInfo`;
with the gate off the selector is ignored and the LIST has no shardInfo, which
is how the operator will tell the two apart."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from ansible_operator.cluster import Cluster

pytestmark = pytest.mark.cluster

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
HALF = 0x8000000000000000  # the range's exclusive end: the lower half of the hash space
# The parser wants exactly 16 hex digits after 0x (or 0x10000000000000000, 2^64).
SELECTOR = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"
BY_UID = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
PER_NAMESPACE = 5
# What the watch test does in each namespace, as the events it should see.
CHANGES = (("ADDED", "added"), ("MODIFIED", "cm-0"), ("DELETED", "cm-1"))


def fnv1a_64(text: str) -> int:
    """The hash the API server puts a field's UTF-8 bytes through."""
    value = FNV_OFFSET
    for byte in text.encode():
        value = ((value ^ byte) * FNV_PRIME) & 0xFFFF_FFFF_FFFF_FFFF
    return value


def in_shard(namespace: str) -> bool:
    return fnv1a_64(namespace) < HALF


def namespaces_on_both_sides(per_side: int) -> list[str]:
    """Fresh names, `per_side` in the shard and as many out, so the filter is
    seen both keeping and dropping (random names all fall on one side too often)."""
    inside: list[str] = []
    outside: list[str] = []
    while len(inside) < per_side or len(outside) < per_side:
        name = f"shard-{uuid.uuid4().hex[:8]}"
        side = inside if in_shard(name) else outside
        if len(side) < per_side:
            side.append(name)
    return inside + outside


def get_json(api: client.ApiClient, path: str, **query: str) -> dict[str, Any]:
    """A GET with query parameters the generated client does not know (shardSelector)."""
    method, url, headers, _, _ = api.param_serialize(
        "GET",
        path,
        query_params=list(query.items()),
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, headers)
    body = response.read()
    assert response.status == 200, body
    return json.loads(body)


def keys(items: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(item["metadata"]["namespace"], item["metadata"]["name"]) for item in items}


def list_at_same_version(api: client.ApiClient, listed: dict[str, Any]) -> set[tuple[str, str]]:
    """Every ConfigMap at the resourceVersion `listed` was served at: what the
    shard is compared with, unaffected by anything written since."""
    full = get_json(
        api,
        "/api/v1/configmaps",
        resourceVersion=listed["metadata"]["resourceVersion"],
        resourceVersionMatch="Exact",
    )
    return keys(full["items"])


def populate(api: client.ApiClient, namespaces: list[str]) -> None:
    core = client.CoreV1Api(api)
    for namespace in namespaces:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        for index in range(PER_NAMESPACE):
            core.create_namespaced_config_map(
                namespace,
                client.V1ConfigMap(
                    metadata=client.V1ObjectMeta(name=f"cm-{index}"), data={"index": str(index)}
                ),
            )


@contextlib.contextmanager
def spread(api: client.ApiClient, per_side: int) -> Iterator[list[str]]:
    """Namespaces in the shard first, then those out, each with PER_NAMESPACE
    ConfigMaps; deleted afterwards."""
    namespaces = namespaces_on_both_sides(per_side)
    core = client.CoreV1Api(api)
    try:
        populate(api, namespaces)
        yield namespaces
    finally:
        for namespace in namespaces:
            with contextlib.suppress(client.ApiException):
                core.delete_namespace(namespace)


@pytest.fixture
def sharded_spread(sharded_api: client.ApiClient) -> Iterator[list[str]]:
    with spread(sharded_api, per_side=2) as namespaces:
        yield namespaces


@pytest.fixture
def default_spread(kube_cluster: Cluster, kube_api: client.ApiClient) -> Iterator[list[str]]:
    if kube_cluster.source == "kubeconfig":
        pytest.skip("the cluster in KUBECONFIG may run with ShardedListAndWatch on")
    with spread(kube_api, per_side=1) as namespaces:
        yield namespaces


def watch_until(
    api: client.ApiClient, since: str, last: tuple[str, str]
) -> list[tuple[str, tuple[str, str]]]:
    """(type, (namespace, name)) of each event a sharded WATCH from `since`
    delivers, up to `last`'s: events come in resourceVersion order, so once it
    arrives, every earlier change has been either delivered or filtered out."""
    method, url, headers, _, _ = api.param_serialize(
        "GET",
        "/api/v1/configmaps",
        query_params=[
            ("watch", "true"),
            ("resourceVersion", since),
            ("shardSelector", SELECTOR),
            ("timeoutSeconds", "30"),
        ],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, headers, _request_timeout=60)
    assert response.status == 200, response.read()
    seen: list[tuple[str, tuple[str, str]]] = []
    try:
        for line in iter_resp_lines(response.response):
            if not line:
                continue
            event = json.loads(line)
            assert event["type"] != "ERROR", event
            meta = event["object"]["metadata"]
            seen.append((event["type"], (meta["namespace"], meta["name"])))
            if seen[-1][1] == last:
                return seen
    finally:
        response.response.close()
    pytest.fail(f"the watch ended without {last}'s event; it delivered {seen}")


def test_fnv1a_64_matches_the_published_vectors() -> None:
    assert fnv1a_64("") == FNV_OFFSET
    assert fnv1a_64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a_64("foobar") == 0x85944171F73967E8


def test_a_sharded_list_keeps_only_objects_whose_namespace_hashes_into_range(
    sharded_api: client.ApiClient, sharded_spread: list[str]
) -> None:
    listed = get_json(sharded_api, "/api/v1/configmaps", shardSelector=SELECTOR)

    assert listed["metadata"].get("shardInfo") == {"selector": SELECTOR}
    everything = list_at_same_version(sharded_api, listed)
    assert keys(listed["items"]) == {key for key in everything if in_shard(key[0])}
    ours = {key for key in keys(listed["items"]) if key[0] in sharded_spread}
    assert ours == {
        (namespace, f"cm-{index}")
        for namespace in sharded_spread[:2]  # the two in the shard
        for index in range(PER_NAMESPACE)
    }


def test_a_sharded_list_by_uid_splits_each_namespace(
    sharded_api: client.ApiClient, sharded_spread: list[str]
) -> None:
    listed = get_json(sharded_api, "/api/v1/configmaps", shardSelector=BY_UID)

    assert listed["metadata"].get("shardInfo") == {"selector": BY_UID}
    full = get_json(
        sharded_api,
        "/api/v1/configmaps",
        resourceVersion=listed["metadata"]["resourceVersion"],
        resourceVersionMatch="Exact",
    )
    lower = [item for item in full["items"] if fnv1a_64(item["metadata"]["uid"]) < HALF]
    assert keys(listed["items"]) == keys(lower)
    # Of our 4 namespaces x 5 ConfigMaps, some of most namespaces on each side.
    ours = {key for key in keys(full["items"]) if key[0] in sharded_spread}
    kept = {key for key in keys(listed["items"]) if key[0] in sharded_spread}
    assert kept and kept != ours


def test_a_sharded_watch_delivers_only_events_of_objects_in_range(
    sharded_api: client.ApiClient, sharded_spread: list[str]
) -> None:
    core = client.CoreV1Api(sharded_api)
    since = get_json(sharded_api, "/api/v1/configmaps")["metadata"]["resourceVersion"]
    for namespace in sharded_spread:  # an add, an update and a delete on each side
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="added"))
        )
        core.patch_namespaced_config_map("cm-0", namespace, {"data": {"index": "changed"}})
        core.delete_namespaced_config_map("cm-1", namespace)
    last = (sharded_spread[0], "last")
    core.create_namespaced_config_map(
        last[0], client.V1ConfigMap(metadata=client.V1ObjectMeta(name=last[1]))
    )

    seen = watch_until(sharded_api, since, last)

    assert [key for _, key in seen if not in_shard(key[0])] == []
    inside = sharded_spread[:2]
    assert {event for event in seen if event[1][0] in sharded_spread} == {
        *((kind, (namespace, name)) for namespace in inside for kind, name in CHANGES),
        ("ADDED", last),
    }


def test_without_the_gate_the_selector_is_ignored_and_the_list_has_no_shard_info(
    kube_api: client.ApiClient, default_spread: list[str]
) -> None:
    listed = get_json(kube_api, "/api/v1/configmaps", shardSelector=SELECTOR)

    assert "shardInfo" not in listed["metadata"]
    assert keys(listed["items"]) == list_at_same_version(kube_api, listed)
    outside = default_spread[1]
    assert not in_shard(outside)
    assert {(outside, f"cm-{index}") for index in range(PER_NAMESPACE)} <= keys(listed["items"])
