"""A watches.yaml of 500 kinds, 499 of which the API server does not serve:
the served one is reconciled at once, the others cost one discovery per look
(not one a second; the looks' backoff schedule is tests/unit/test_unserved_kinds_backoff.py),
each is logged once, and one whose CRD is installed later is watched without a
restart."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from apiserver_relay import ApiServerRelay
from faultops import OPERATOR, StartOperator, converged, create
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.manager.unserved import FIRST_LOOK
from ansible_operator.testing.manifests import apply_manifests, schemaless_crd
from ansible_operator.testing.waiting import wait_for_condition

pytestmark = pytest.mark.cluster

ABSENT_GROUP = "absent.ansible-operator.io"
UNSERVED = 498  # plus the late kind: 499 kinds not served at start


def late_crd(group: str) -> dict[str, object]:
    return schemaless_crd(group, "Late", "lates")


@pytest.fixture
def late_group(kube_api: client.ApiClient) -> Iterator[str]:
    """A group no other test serves; its CRD is deleted afterwards."""
    group = f"late-{uuid.uuid4().hex[:8]}.ansible-operator.io"
    yield group
    try:
        client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(f"lates.{group}")
    except client.ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
def relay(kube_cluster: Cluster) -> Iterator[ApiServerRelay]:
    relay = ApiServerRelay(kube_cluster.kubeconfig).start()
    yield relay
    relay.stop()


def write_watches(path: Path, late_group: str) -> Path:
    roles = OPERATOR / "roles"
    watches: list[dict[str, object]] = [
        {"group": "faults.ansible-operator.io", "version": "v1alpha1", "kind": "Work"},
        {"group": late_group, "version": "v1", "kind": "Late", "role": str(roles / "echo")},
    ]
    watches += [
        {"group": ABSENT_GROUP, "version": "v1", "kind": f"Absent{i}"} for i in range(UNSERVED)
    ]
    for watch in watches:
        watch.setdefault("role", str(roles / "work"))
    path.write_text(yaml.safe_dump(watches, sort_keys=False))
    return path


def test_unserved_kinds_cost_one_discovery_per_look_and_one_appearing_later_is_watched(
    relay: ApiServerRelay,
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    late_group: str,
    tmp_path: Path,
) -> None:
    watches = write_watches(tmp_path / "watches.yaml", late_group)
    operator = start_operator(
        watches=watches, kubeconfig=relay.write_kubeconfig(tmp_path / "operator.kubeconfig")
    )
    started = time.monotonic()
    discoveries = [r for r in relay.requests if r.operators_discovery]
    assert len(discoveries) == 1, "one discovery for all 500 watches before serving"

    create(kube_api, kube_namespace, "Work", "served", value="yes")
    assert converged(kube_api, kube_namespace, "Work", "served")["status"]["value"] == "yes"

    # The Late kind's CRD arrives after start-up; an object of it gets reconciled.
    apply_manifests(kube_api, yaml.safe_dump(late_crd(late_group)))
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        late_group,
        "v1",
        kube_namespace,
        "lates",
        {"apiVersion": f"{late_group}/v1", "kind": "Late", "metadata": {"name": "arrived"}},
    )
    wait_for_condition(
        kube_api, late_group, "v1", "lates", kube_namespace, "arrived", "Successful", timeout=120
    )
    echoed = client.CoreV1Api(kube_api).read_namespaced_config_map("arrived-echo", kube_namespace)
    assert echoed.data is not None

    # The late kind was found by a look; looks are at least FIRST_LOOK apart (the
    # first FIRST_LOOK after start-up), never one per watch or one a second.
    elapsed = time.monotonic() - started
    looks = [r for r in relay.requests if r.operators_discovery]
    assert 2 <= len(looks) <= 2 + elapsed / FIRST_LOOK, (
        f"{len(looks)} discoveries in the {elapsed:.0f}s after start-up "
        f"(at {[round(r.at - started, 1) for r in looks]}s)"
    )

    logs = operator.logs
    for i in (0, 1, UNSERVED - 1):
        said = re.findall(rf"not watching kind=Absent{i} group={ABSENT_GROUP} ", logs)
        assert len(said) == 1, f"Absent{i} logged {len(said)} times, once expected"
    assert len(re.findall(r"not watching kind=", logs)) == UNSERVED + 1
    assert len(re.findall(r"now watching kind=Late ", logs)) == 1
    assert operator.process is not None and operator.process.poll() is None
