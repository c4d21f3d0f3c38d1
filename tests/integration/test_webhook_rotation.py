"""The operator-made webhook CA renewed while `ansible-operator run` serves a real API server:
by the operator as the CA nears its end, then by "another replica" writing the Secret. Each
time the configuration's caBundle holds the new CA and the one it replaced, the server moves
to a certificate of the new CA without stopping, and admission requests keep being answered.

Lifetimes of hours with looks every 2s (ANSIBLE_OPERATOR_WEBHOOK_TLS_LIFETIMES): a CA made by
the test with 45 minutes left is kept at start and renewed at once, 60 minutes before its end.
"""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually
from ansible_operator.webhooks import tls

pytestmark = pytest.mark.cluster

CASE = "rotation.test.io/case"
LIFETIMES = "ca=2h,ca-renew-before=1h,serving=1h,check-every=2s,settle=2s"
ROLE = """
- name: refuse the forbidden key
  operator_sdk.util.admission_response:
    allowed: false
    message: "key 'forbidden' is not allowed in ConfigMap {{ admission.name }}"
  when: "'forbidden' in (admission.object.data | default({}, true))"
- name: allow the rest
  operator_sdk.util.admission_response:
    allowed: true
"""
WATCHES = f"""
- webhook:
    name: rotation.webhooks.test.io
    type: validating
    rules:
      - apiGroups: [""]
        apiVersions: [v1]
        resources: [configmaps]
        operations: [CREATE]
        scope: Namespaced
    objectSelector:
      matchLabels: {{{CASE}: rotation}}
    role: deny
"""


def pems(bundle: bytes) -> list[bytes]:
    return [
        cert.public_bytes(serialization.Encoding.PEM)
        for cert in x509.load_pem_x509_certificates(bundle)
    ]


@pytest.fixture
def ca_secret(kube_api: client.ApiClient) -> Iterator[tuple[str, str, bytes]]:
    """The CA Secret (namespace, name), holding a CA with 45 minutes left (its PEM)."""
    namespace = f"webhook-rotation-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    old = tls.new_ca(datetime.timedelta(minutes=45))
    core.create_namespaced_secret(namespace, tls.ca_secret(namespace, "webhook-ca", old))
    yield namespace, "webhook-ca", old[0]
    core.delete_namespace(namespace)


@pytest.fixture
def operator(
    kube_cluster: Cluster, ca_secret: tuple[str, str, bytes], tmp_path: Path
) -> Iterator[tuple[OperatorProcess, str]]:
    (tmp_path / "roles" / "deny" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "deny" / "tasks" / "main.yml").write_text(ROLE)
    (tmp_path / "watches.yaml").write_text(WATCHES)
    name = f"webhook-rotation-{uuid.uuid4().hex[:6]}"
    process = OperatorProcess(
        tmp_path / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=tmp_path / "operator.log",
        args=[
            "--webhook-bind-address=127.0.0.1:0",
            f"--webhook-configuration-name={name}",
            f"--webhook-ca-secret={ca_secret[0]}/{ca_secret[1]}",
        ],
        env={tls.LIFETIMES_ENV: LIFETIMES},
    ).start()
    try:
        yield process, name
    finally:
        process.stop()


def stored_ca(api: client.ApiClient, secret: tuple[str, str, bytes]) -> tuple[bytes, bytes]:
    data = client.CoreV1Api(api).read_namespaced_secret(secret[1], secret[0]).data
    return base64.b64decode(data["ca.crt"]), base64.b64decode(data["ca.key"])


def ca_bundle_and_url(api: client.ApiClient, name: str) -> tuple[bytes, str]:
    configuration = client.AdmissionregistrationV1Api(api).read_validating_webhook_configuration(
        name
    )
    [hook] = configuration.webhooks
    return base64.b64decode(hook.client_config.ca_bundle), hook.client_config.url


def served_certificate_verifies_with(url: str, ca_pem: bytes) -> bool:
    where = urlsplit(url)
    context = ssl.create_default_context(cadata=ca_pem.decode())
    try:
        with (
            socket.create_connection((where.hostname, where.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=where.hostname),
        ):
            return True
    except ssl.SSLCertVerificationError:
        return False


def forbidden(data_key: str = "forbidden") -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"cm-{uuid.uuid4().hex[:6]}", labels={CASE: "rotation"}),
        data={data_key: "1"},
    )


def wait_until_served(api: client.ApiClient, namespace: str) -> None:
    """The API server reads a new configuration a moment after the operator made it."""

    def refused() -> bool:
        try:
            client.CoreV1Api(api).create_namespaced_config_map(
                namespace, forbidden(), dry_run="All"
            )
        except client.ApiException as error:
            return "denied the request" in (error.body or "")
        return False

    eventually(refused, timeout=30, interval=0.5, what="the webhook served")


def admission_is_answered(api: client.ApiClient, namespace: str) -> None:
    """A refusal with the role's message, then an admitted ConfigMap: the API server
    reached the webhook over TLS both times."""
    core = client.CoreV1Api(api)
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_config_map(namespace, forbidden())
    assert "key 'forbidden' is not allowed in ConfigMap" in (refused.value.body or "")
    created = core.create_namespaced_config_map(namespace, forbidden("fine"))
    assert created.data == {"fine": "1"}


def test_the_ca_is_renewed_while_the_operator_runs_and_admission_keeps_working(
    operator: tuple[OperatorProcess, str],
    kube_api: client.ApiClient,
    kube_namespace: str,
    ca_secret: tuple[str, str, bytes],
) -> None:
    _process, name = operator
    old_ca = ca_secret[2]

    def renewed_and_served() -> bytes | None:
        """The CA the operator renewed, once it is in the Secret, in the bundle beside
        the one it replaced, and behind the certificate the webhook serves."""
        new_ca = stored_ca(kube_api, ca_secret)[0]
        bundle, url = ca_bundle_and_url(kube_api, name)
        if new_ca == old_ca or pems(bundle) != [new_ca, old_ca]:
            return None
        return new_ca if served_certificate_verifies_with(url, new_ca) else None

    first_ca = eventually(renewed_and_served, timeout=60, what="the CA renewed and served")
    wait_until_served(kube_api, kube_namespace)
    admission_is_answered(kube_api, kube_namespace)

    # Another replica renews the CA: this one follows.
    secret = client.CoreV1Api(kube_api).read_namespaced_secret(ca_secret[1], ca_secret[0])
    theirs = tls.new_ca(datetime.timedelta(hours=2))
    body = tls.ca_secret(ca_secret[0], ca_secret[1], theirs, (first_ca,))
    body["metadata"]["resourceVersion"] = secret.metadata.resource_version
    client.CoreV1Api(kube_api).replace_namespaced_secret(ca_secret[1], ca_secret[0], body)

    def followed() -> bool:
        bundle, url = ca_bundle_and_url(kube_api, name)
        return (
            pems(bundle)[:2] == [theirs[0], first_ca]
            and served_certificate_verifies_with(url, theirs[0])
            and not served_certificate_verifies_with(url, first_ca)
        )

    eventually(followed, timeout=60, what="the other replica's CA in the bundle and served")
    admission_is_answered(kube_api, kube_namespace)
