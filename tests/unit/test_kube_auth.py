"""Every way of authenticating gives the Authorization header the API server
expects, and keeps it fresh: token files re-read when rotated, OIDC id-tokens
renewed. Exec plugins, re-run before expiry and after a 401, start a process:
tests/processes/test_kube_exec_plugin.py. The API server itself answers in
tests/integration/test_token_auth.py."""

from __future__ import annotations

import base64
import datetime
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from ansible_operator.kube import config as config_module
from ansible_operator.kube import credentials
from ansible_operator.kube.config import (
    KubeConfigError,
    from_client_configuration,
    in_cluster,
    load_config,
)
from ansible_operator.serving.pki import create_ca, issue_client_cert
from kubeconfig_files import SERVER, UTC, Clock, write_kubeconfig


def jwt(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def replace_file(path: Path, text: str) -> None:
    """As a careful writer (and the kubelet) does: a new file renamed over the old."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    fresh.replace(path)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(credentials, "now", fake)
    return fake


# ----- kubeconfig -------------------------------------------------------------


async def test_kubeconfig_token_is_sent_as_a_bearer_token(tmp_path: Path) -> None:
    config = load_config(write_kubeconfig(tmp_path, {"token": "sha256~oc-login-token"}))
    assert await config.auth_headers() == {"Authorization": "Bearer sha256~oc-login-token"}
    assert config.server == SERVER
    assert isinstance(config.ssl, ssl.SSLContext)


async def test_kubeconfig_context_namespace_is_read(tmp_path: Path) -> None:
    config = load_config(write_kubeconfig(tmp_path, {"token": "t"}, namespace="team-a"))
    assert config.namespace == "team-a"


async def test_token_file_is_read_relative_to_the_kubeconfig_and_reread_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("first-token\n")
    path = write_kubeconfig(tmp_path, {"tokenFile": "token"})
    monkeypatch.chdir(tmp_path / "pki")  # relative to the kubeconfig, not to the cwd
    config = load_config(path)
    assert await config.auth_headers() == {"Authorization": "Bearer first-token"}

    replace_file(tmp_path / "token", "second-token\n")
    assert await config.auth_headers() == {"Authorization": "Bearer second-token"}

    (tmp_path / "token").write_text("third-token-written-in-place")
    assert await config.auth_headers() == {"Authorization": "Bearer third-token-written-in-place"}


async def test_token_file_that_vanishes_keeps_the_last_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("kept")
    config = load_config(write_kubeconfig(tmp_path, {"tokenFile": "token"}))
    (tmp_path / "token").unlink()
    assert await config.auth_headers() == {"Authorization": "Bearer kept"}


def test_missing_token_file_is_an_error_naming_kubeconfig_and_user(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path, {"tokenFile": "nowhere"})
    with pytest.raises(KubeConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value)
    assert "'operator'" in str(error.value)
    assert "nowhere" in str(error.value)


async def test_basic_auth(tmp_path: Path) -> None:
    config = load_config(write_kubeconfig(tmp_path, {"username": "admin", "password": "s3cr:t"}))
    expected = "Basic " + base64.b64encode(b"admin:s3cr:t").decode()
    assert await config.auth_headers() == {"Authorization": expected}


async def test_client_certificate_sends_no_authorization_header(tmp_path: Path) -> None:
    ca = create_ca(tmp_path / "client-ca")
    pair = issue_client_cert(ca, tmp_path / "client-ca", "operator")
    user = {
        "client-certificate-data": base64.b64encode(pair.cert_pem()).decode(),
        "client-key-data": base64.b64encode(pair.key_pem()).decode(),
    }
    config = load_config(write_kubeconfig(tmp_path, user))
    assert await config.auth_headers() == {}
    assert await config.refresh_credentials({}) is False
    assert isinstance(config.ssl, ssl.SSLContext)


# ----- OIDC -------------------------------------------------------------------


def oidc_user(id_token: str) -> dict[str, Any]:
    return {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "client-id": "operator",
                "client-secret": "secret",
                "id-token": id_token,
                "refresh-token": "refresh",
                # Never reached: the tests stay off the network.
                "idp-issuer-url": "https://127.0.0.1:9/never",
            },
        }
    }


async def test_oidc_id_token_is_sent(tmp_path: Path) -> None:
    exp = int((datetime.datetime.now(tz=UTC) + datetime.timedelta(hours=1)).timestamp())
    token = jwt({"iss": "https://idp.example", "sub": "operator", "exp": exp})
    config = load_config(write_kubeconfig(tmp_path, oidc_user(token)))
    assert await config.auth_headers() == {"Authorization": f"Bearer {token}"}


async def test_oidc_id_token_near_expiry_is_renewed_through_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = int(datetime.datetime.now(tz=UTC).timestamp())
    # An hour-long token with a minute left, and its successor.
    expiring = jwt({"iat": now - 59 * 60, "exp": now + 60})
    renewed = jwt({"iat": now, "exp": now + 3600})
    asked: list[tuple[str, str | None]] = []

    def library_header(path: str, context: str | None) -> str:
        asked.append((path, context))
        return f"Bearer {renewed}"

    monkeypatch.setattr(config_module, "_library_header", library_header)
    path = write_kubeconfig(tmp_path, oidc_user(expiring))
    config = load_config(path)
    assert await config.auth_headers() == {"Authorization": f"Bearer {renewed}"}
    assert await config.auth_headers() == {"Authorization": f"Bearer {renewed}"}
    assert asked == [(str(path), None)]


# ----- in-cluster -------------------------------------------------------------


def kubelet_mount(root: Path, ca_pem: bytes, token: str, namespace: str) -> Path:
    """A projected service-account volume as the kubelet lays it out: the files
    are symlinks through `..data`, itself a symlink to a timestamped directory."""
    version = root / "..2025_01_01_00_00_00.1"
    version.mkdir(parents=True)
    (version / "ca.crt").write_bytes(ca_pem)
    (version / "namespace").write_text(namespace)
    (version / "token").write_text(token)
    (root / "..data").symlink_to(version.name)
    for name in ("ca.crt", "namespace", "token"):
        (root / name).symlink_to(f"..data/{name}")
    return root


def kubelet_rotate(root: Path, token: str) -> None:
    """The kubelet's atomic update: a new directory, then `..data` renamed over."""
    version = root / "..2025_01_01_00_50_00.2"
    version.mkdir()
    for name in ("ca.crt", "namespace"):
        (version / name).write_bytes((root / name).read_bytes())
    (version / "token").write_text(token)
    (root / "..data_tmp").symlink_to(version.name)
    (root / "..data_tmp").replace(root / "..data")


async def test_in_cluster_reads_token_ca_and_namespace_and_follows_rotation(
    tmp_path: Path,
) -> None:
    ca = create_ca(tmp_path / "pki")
    root = kubelet_mount(tmp_path / "serviceaccount", ca.cert_pem(), "projected-1", "operators")
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = in_cluster(root, environ)
    assert config.server == "https://10.96.0.1:443"
    assert config.namespace == "operators"
    assert isinstance(config.ssl, ssl.SSLContext)
    assert config.ssl.get_ca_certs()[0]["subject"] == (
        (("commonName", "ansible-operator-local-ca"),),
    )
    assert await config.auth_headers() == {"Authorization": "Bearer projected-1"}

    kubelet_rotate(root, "projected-2")
    assert await config.auth_headers() == {"Authorization": "Bearer projected-2"}


def test_in_cluster_ipv6_service_host_is_bracketed(tmp_path: Path) -> None:
    ca = create_ca(tmp_path / "pki")
    root = kubelet_mount(tmp_path / "serviceaccount", ca.cert_pem(), "t", "ns")
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster(root, environ).server == "https://[fd00::1]:443"


def test_in_cluster_without_token_says_which_file(tmp_path: Path) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(KubeConfigError) as error:
        in_cluster(tmp_path, environ)
    assert str(tmp_path / "token") in str(error.value)


# ----- a kubernetes.client.Configuration --------------------------------------


async def test_client_configuration_api_key_and_prefix_as_the_library_reads_them() -> None:
    prefixed = k8s_client.Configuration(host=SERVER)
    prefixed.api_key = {"BearerToken": "abc"}
    prefixed.api_key_prefix = {"BearerToken": "Bearer"}
    assert await from_client_configuration(prefixed).auth_headers() == {
        "Authorization": "Bearer abc"
    }

    alias = k8s_client.Configuration(host=SERVER)
    alias.api_key = {"authorization": "Bearer def"}
    assert await from_client_configuration(alias).auth_headers() == {"Authorization": "Bearer def"}

    rotating = k8s_client.Configuration(host=SERVER)
    tokens = iter(["one", "two"])

    def hook(configuration: k8s_client.Configuration) -> None:
        configuration.api_key = {"BearerToken": f"Bearer {next(tokens)}"}

    rotating.refresh_api_key_hook = hook
    config = from_client_configuration(rotating)
    assert await config.auth_headers() == {"Authorization": "Bearer one"}
    assert await config.auth_headers() == {"Authorization": "Bearer two"}
