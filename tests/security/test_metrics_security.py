"""Metrics served as controller-runtime serves them: with `--metrics-secure`,
HTTPS to clients whose bearer token the API server authenticates (TokenReview)
and authorizes for GET /metrics (SubjectAccessReview); unsecured, only on
loopback by default. A deleted object's series go with it."""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_operator import OPERATOR, condition, create, delete, start
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.manager.bound_addresses import read_bound_addresses
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster
_SIOCGIFADDR = 0x8915


@pytest.fixture(scope="module")
def attack_crds(kube_api: client.ApiClient) -> None:
    apply_manifests(kube_api, OPERATOR / "crds.yaml")


@pytest.fixture(scope="module")
def secured(
    kube_cluster: Cluster, attack_crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[OperatorProcess, int]]:
    scratch = tmp_path_factory.mktemp("metrics")
    process = start(
        kube_cluster,
        scratch / "operator.log",
        mode="warm",
        args=["--metrics-secure", "--metrics-bind-address=127.0.0.1:0"],
    )
    yield process, listening_port(process)
    process.stop()


def listening_port(process: OperatorProcess) -> int:
    return process.port("metrics")


def fetch(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    context = ssl._create_unverified_context()  # the operator's self-signed certificate
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def account_token(api: client.ApiClient, namespace: str, name: str, *, may_read: bool) -> str:
    """A ServiceAccount's token from the TokenRequest API; `may_read`: bound to
    a ClusterRole allowing GET on the /metrics non-resource URL."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
    )
    if may_read:
        role = f"metrics-reader-{namespace}"
        rbac.create_cluster_role(
            client.V1ClusterRole(
                metadata=client.V1ObjectMeta(name=role),
                rules=[client.V1PolicyRule(non_resource_urls=["/metrics"], verbs=["get"])],
            )
        )
        rbac.create_cluster_role_binding(
            client.V1ClusterRoleBinding(
                metadata=client.V1ObjectMeta(name=role),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role
                ),
                subjects=[
                    client.RbacV1Subject(kind="ServiceAccount", name=name, namespace=namespace)
                ],
            )
        )
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
    )
    return core.create_namespaced_service_account_token(name, namespace, request).status.token


@pytest.fixture
def reader_token(kube_api: client.ApiClient, kube_namespace: str) -> Iterator[str]:
    yield account_token(kube_api, kube_namespace, "prometheus", may_read=True)
    rbac = client.RbacAuthorizationV1Api(kube_api)
    with contextlib.suppress(client.ApiException):
        rbac.delete_cluster_role_binding(f"metrics-reader-{kube_namespace}")
    with contextlib.suppress(client.ApiException):
        rbac.delete_cluster_role(f"metrics-reader-{kube_namespace}")


def test_metrics_without_a_valid_token_are_refused(
    secured: tuple[OperatorProcess, int],
) -> None:
    _process, port = secured
    status, _body = fetch(f"https://127.0.0.1:{port}/metrics")
    assert status == 401
    status, _body = fetch(f"https://127.0.0.1:{port}/metrics", token="not-a-token")
    assert status == 401


def test_metrics_are_served_to_an_account_allowed_to_get_them(
    secured: tuple[OperatorProcess, int], reader_token: str
) -> None:
    _process, port = secured
    status, body = fetch(f"https://127.0.0.1:{port}/metrics", token=reader_token)
    assert status == 200
    assert "ansible_operator_build_info" in body


def test_metrics_are_refused_to_an_account_without_that_permission(
    secured: tuple[OperatorProcess, int], kube_api: client.ApiClient, kube_namespace: str
) -> None:
    _process, port = secured
    token = account_token(kube_api, kube_namespace, "nosy", may_read=False)
    status, body = fetch(f"https://127.0.0.1:{port}/metrics", token=token)
    assert status == 403
    assert "ansible_operator_build_info" not in body


def test_secure_metrics_are_not_served_over_plain_http(
    secured: tuple[OperatorProcess, int], reader_token: str
) -> None:
    _process, port = secured
    with pytest.raises((OSError, http.client.HTTPException)):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {reader_token}"}
        )
        urllib.request.urlopen(request, timeout=10).read()


def test_a_deleted_objects_series_are_dropped(
    secured: tuple[OperatorProcess, int],
    reader_token: str,
    kube_api: client.ApiClient,
    kube_namespace: str,
) -> None:
    _process, port = secured
    series = re.compile(
        rf'resource_created_at_seconds\{{[^}}]*name="brief"[^}}]*namespace="{kube_namespace}"'
    )

    def exposition() -> str:
        status, body = fetch(f"https://127.0.0.1:{port}/metrics", token=reader_token)
        assert status == 200
        return body

    create(kube_api, kube_namespace, "Chatter", "brief", size=8)
    condition(kube_api, kube_namespace, "Chatter", "brief", "Successful")
    assert series.search(exposition())
    delete(kube_api, kube_namespace, "Chatter", "brief")
    eventually(
        lambda: not series.search(exposition()),
        timeout=30,
        what="the deleted object's resource_created_at_seconds series gone",
    )


def outside_address() -> str | None:
    """An IPv4 address of this host that is not loopback."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with probe:
        for _index, name in socket.if_nameindex():
            if name == "lo":
                continue
            with contextlib.suppress(OSError):
                packed = struct.pack("256s", name.encode()[:15])
                answer = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, packed)
                return socket.inet_ntoa(answer[20:24])
    return None


def test_unsecured_metrics_listen_on_loopback_only_by_default(
    kube_cluster: Cluster, attack_crds: None, kube_namespace: str, tmp_path: Path
) -> None:
    address = outside_address()
    if address is None:
        pytest.skip("this host has no address but loopback")
    log, addresses = tmp_path / "operator.log", tmp_path / "addresses.json"
    command = [
        sys.executable,
        "-m",
        "ansible_operator.cli",
        "run",
        f"--watches-file={OPERATOR / 'watches.yaml'}",
        "--health-probe-bind-address=127.0.0.1:0",
        "--proxy-port=0",
        f"--bound-addresses-file={addresses}",
    ]  # and no metrics flag: the defaults
    env = {**os.environ, "KUBECONFIG": str(kube_cluster.kubeconfig)}
    env["WATCH_NAMESPACE"] = kube_namespace
    with log.open("wb") as output:
        operator = subprocess.Popen(
            command,
            cwd=OPERATOR,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        bound = eventually(
            lambda: read_bound_addresses(addresses),
            what="the servers listening",
            describe=lambda: log.read_text()[-3000:],
        )
        host, port = bound["metrics"]
        assert host == "127.0.0.1"
        assert fetch(f"http://127.0.0.1:{port}/metrics")[0] == 200
        with pytest.raises(OSError):  # refused: nothing listens there
            socket.create_connection((address, port), timeout=5).close()
    finally:
        operator.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            operator.wait(40)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(operator.pid, 9)
        operator.wait()
