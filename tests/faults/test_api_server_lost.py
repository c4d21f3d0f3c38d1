"""The API server moves: its old address goes dead, the kubeconfig is rewritten
to name the new one (what `ansible-operator cluster down` then `cluster up`
does when it picks new ports). The operator's health says so while the server
is lost, and it follows the kubeconfig, without a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apiserver_relay import ApiServerRelay
from faultops import StartOperator, converged, create, patch_spec
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
def relay(kube_cluster: Cluster) -> Iterator[ApiServerRelay]:
    relay = ApiServerRelay(kube_cluster.kubeconfig).start()
    yield relay
    relay.stop()


def test_lost_api_server_fails_health_and_a_rewritten_kubeconfig_is_followed(
    relay: ApiServerRelay,
    kube_cluster: Cluster,
    start_operator: StartOperator,
    kube_api: client.ApiClient,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    kubeconfig = relay.write_kubeconfig(tmp_path / "operator.kubeconfig")
    operator = start_operator(
        kubeconfig=kubeconfig,
        args=["--api-server-ready-grace=2s", "--api-server-live-grace=6s"],
    )
    create(kube_api, kube_namespace, "Work", "before", value="one")
    assert converged(kube_api, kube_namespace, "Work", "before")["status"]["value"] == "one"
    assert (operator.health("/readyz"), operator.health("/healthz")) == (200, 200)

    relay.close()  # the server's old address: connections refused from now on
    eventually(
        lambda: operator.health("/readyz") == 503,
        timeout=60,
        what="/readyz failing while the API server is unreachable",
    )
    eventually(
        lambda: operator.health("/healthz") == 500,
        timeout=60,
        what="/healthz failing once the API server has been unreachable long enough",
    )

    # The server "came back on another port": the kubeconfig now names it
    # (HTTPS and client certificates, where the old address was plain HTTP).
    kubeconfig.write_bytes(kube_cluster.kubeconfig.read_bytes())
    eventually(
        lambda: (operator.health("/readyz"), operator.health("/healthz")) == (200, 200),
        timeout=60,
        what="health back once the rewritten kubeconfig is followed",
    )
    assert "kubeconfig changed, using it now" in operator.logs  # what its user reads
    create(kube_api, kube_namespace, "Work", "after", value="two")
    assert converged(kube_api, kube_namespace, "Work", "after")["status"]["value"] == "two"
    # The watch of the kind was started again on the new server: a change of
    # an object from before is seen.
    patch_spec(kube_api, kube_namespace, "Work", "before", value="three")
    assert converged(kube_api, kube_namespace, "Work", "before")["status"]["value"] == "three"
    assert operator.process is not None and operator.process.poll() is None
