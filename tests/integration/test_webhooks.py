"""Admission webhooks written as Ansible roles, served by `ansible-operator run` to a real
API server, with real ansible-runner and ansible-core.

One operator for the module serves a webhook per behaviour, each picking its ConfigMaps by the
label `webhooks.test.io/case`, so the cases never meet. Requests are made as kubectl makes
them (the API server's answer, its message included, is what a user sees).
"""

from __future__ import annotations

import base64
import re
import socket
import ssl
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

CASE = "webhooks.test.io/case"
EXPLOIT = "{{ lookup('pipe', 'id') }}"

ROLES = {
    "deny": """
- name: refuse the forbidden key
  operator_sdk.util.admission_response:
    allowed: false
    reason: Forbidden
    message: "key 'forbidden' is not allowed in ConfigMap {{ admission.name }}"
  when: "'forbidden' in (admission.object.data | default({}, true))"
- name: allow the rest
  operator_sdk.util.admission_response:
    allowed: true
""",
    "mutate": """
- name: mark it, and echo the payload it carries
  set_fact:
    marked: >-
      {{ admission.object | combine({'metadata': {
           'labels': {'webhooks.test.io/mutated': 'yes'},
           'annotations': {'echo': admission.object.data.payload}}}, recursive=True) }}
- name: answer with the changed object
  operator_sdk.util.admission_response:
    object: "{{ marked }}"
""",
    "broken": """
- name: break
  fail:
    msg: broken on purpose
""",
    "slow": """
- name: take longer than the webhook may
  command: sleep 120
""",
    "write": """
- name: read through the proxy (allowed)
  kubernetes.core.k8s_info:
    kind: Namespace
    name: "{{ admission.namespace }}"
  register: read
- name: write through the proxy (refused without side effects)
  kubernetes.core.k8s:
    state: present
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: written-by-webhook
        namespace: "{{ admission.namespace }}"
- operator_sdk.util.admission_response:
    allowed: true
""",
    "silent": """
- name: answer nothing
  debug:
    msg: nothing to say
""",
}


def webhook(case: str, role: str, kind: str = "validating", **options: Any) -> str:
    extra = "".join(f"\n    {key}: {value}" for key, value in options.items())
    return f"""
- webhook:
    name: {case}.webhooks.test.io
    type: {kind}
    rules:
      - apiGroups: [""]
        apiVersions: [v1]
        resources: [configmaps]
        operations: [CREATE, UPDATE]
        scope: Namespaced
    objectSelector:
      matchLabels: {{{CASE}: {case}}}
    role: {role}{extra}
"""


WATCHES = "".join(
    [
        webhook("deny", "deny"),
        webhook("mutate", "mutate", kind="mutating"),
        webhook("fail", "broken", failurePolicy="Fail"),
        webhook("ignore", "broken", failurePolicy="Ignore"),
        webhook("slow", "slow", timeoutSeconds=4),
        webhook("write", "write"),
        webhook("silent", "silent"),
    ]
)


@pytest.fixture(scope="module")
def ca_secret(kube_api: client.ApiClient) -> Iterator[tuple[str, str]]:
    namespace = f"webhook-ca-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    yield namespace, "webhook-ca"
    core.delete_namespace(namespace)


@pytest.fixture(scope="module")
def configuration_name() -> str:
    return f"webhook-test-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def operator(
    kube_cluster: Cluster,
    kube_api: client.ApiClient,
    ca_secret: tuple[str, str],
    configuration_name: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    project = tmp_path_factory.mktemp("webhook-operator")
    for role, tasks in ROLES.items():
        (project / "roles" / role / "tasks").mkdir(parents=True)
        (project / "roles" / role / "tasks" / "main.yml").write_text(tasks)
    (project / "watches.yaml").write_text(WATCHES)
    process = OperatorProcess(
        project / "watches.yaml",
        kube_cluster.kubeconfig,
        log_path=project / "operator.log",
        args=[
            "--webhook-bind-address=127.0.0.1:0",
            f"--webhook-configuration-name={configuration_name}",
            f"--webhook-ca-secret={ca_secret[0]}/{ca_secret[1]}",
        ],
    ).start()
    try:
        wait_until_served(kube_api)
        yield process
    finally:
        process.stop()
    admission = client.AdmissionregistrationV1Api(kube_api)
    # Served on loopback: gone with the operator, so nothing is left refusing requests.
    for read in (
        admission.read_mutating_webhook_configuration,
        admission.read_validating_webhook_configuration,
    ):
        with pytest.raises(client.ApiException) as gone:
            read(configuration_name)
        assert gone.value.status == 404


def config_map(name: str, case: str, data: dict[str, str]) -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels={CASE: case}), data=data
    )


def create(api: client.ApiClient, namespace: str, body: client.V1ConfigMap) -> Any:
    return client.CoreV1Api(api).create_namespaced_config_map(namespace, body)


def refusal(api: client.ApiClient, namespace: str, body: client.V1ConfigMap) -> str:
    """The message a refused create gets, as kubectl prints it."""
    with pytest.raises(client.ApiException) as refused:
        create(api, namespace, body)
    return refused.value.body or ""


def wait_until_served(api: client.ApiClient) -> None:
    """The API server reads new webhook configurations a moment after they are made."""
    core = client.CoreV1Api(api)

    def refused() -> bool:
        try:
            core.create_namespaced_config_map(
                "default",
                config_map(f"probe-{uuid.uuid4().hex[:6]}", "deny", {"forbidden": "x"}),
                dry_run="All",
            )
        except client.ApiException as error:
            return "denied the request" in (error.body or "")
        return False

    eventually(refused, timeout=60, interval=0.5, what="the webhooks served")


def test_validating_role_denies_with_its_message(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    message = refusal(kube_api, kube_namespace, config_map("bad", "deny", {"forbidden": "1"}))
    assert (
        'admission webhook \\"deny.webhooks.test.io\\" denied the request: '
        "key 'forbidden' is not allowed in ConfigMap bad"
    ) in message
    created = create(kube_api, kube_namespace, config_map("good", "deny", {"fine": "1"}))
    assert created.data == {"fine": "1"}


def test_mutating_role_changes_the_object_and_never_templates_cluster_data(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    create(kube_api, kube_namespace, config_map("changed", "mutate", {"payload": EXPLOIT}))
    stored = client.CoreV1Api(kube_api).read_namespaced_config_map("changed", kube_namespace)
    assert stored.metadata.labels == {CASE: "mutate", "webhooks.test.io/mutated": "yes"}
    # The request's data reached the role as text: the lookup never ran.
    assert stored.metadata.annotations == {"echo": EXPLOIT}
    assert stored.data == {"payload": EXPLOIT}


def test_failing_role_under_failure_policy_fail_is_rejected_with_the_reason(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    message = refusal(kube_api, kube_namespace, config_map("f", "fail", {}))
    assert "fail.webhooks.test.io" in message
    assert "the role failed: task " in message and ") failed: broken on purpose" in message
    # Logged before the answer went back: what the operator's user reads of it.
    assert re.search(
        r"admission decided by failurePolicy=Fail webhook=fail.webhooks.test.io "
        rf"kind=ConfigMap namespace={kube_namespace} name=f operation=CREATE allowed=false "
        r"reason='the role failed: task .* failed: broken on purpose'",
        operator.logs,
    )


def test_failing_role_under_failure_policy_ignore_is_admitted(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    created = create(kube_api, kube_namespace, config_map("i", "ignore", {"a": "b"}))
    assert created.metadata.name == "i"
    assert re.search(
        r"admission decided by failurePolicy=Ignore webhook=ignore.webhooks.test.io "
        rf"kind=ConfigMap namespace={kube_namespace} name=i operation=CREATE allowed=true",
        operator.logs,
    )


def test_role_that_takes_too_long_is_decided_by_the_policy_before_the_api_server_gives_up(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    message = refusal(kube_api, kube_namespace, config_map("s", "slow", {}))
    assert "slow.webhooks.test.io" in message
    assert "the role did not answer within 3.6s (timeoutSeconds 4; last task: " in message
    assert "take longer than the webhook may" in message


def test_webhook_without_side_effects_may_read_but_not_write_through_the_proxy(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    message = refusal(kube_api, kube_namespace, config_map("w", "write", {}))
    assert "this run may only read" in message
    with pytest.raises(client.ApiException) as absent:
        client.CoreV1Api(kube_api).read_namespaced_config_map("written-by-webhook", kube_namespace)
    assert absent.value.status == 404


def test_role_that_answers_nothing_gets_the_failure_policy(
    operator: OperatorProcess, kube_api: client.ApiClient, kube_namespace: str
) -> None:
    message = refusal(kube_api, kube_namespace, config_map("n", "silent", {}))
    assert "the role ended without an answer" in message


def test_configurations_carry_a_ca_bundle_that_verifies_the_serving_certificate(
    operator: OperatorProcess,
    kube_api: client.ApiClient,
    ca_secret: tuple[str, str],
    configuration_name: str,
) -> None:
    admission = client.AdmissionregistrationV1Api(kube_api)
    mutating = admission.read_mutating_webhook_configuration(configuration_name)
    validating = admission.read_validating_webhook_configuration(configuration_name)
    assert [w.name for w in mutating.webhooks] == ["mutate.webhooks.test.io"]
    assert {w.name for w in validating.webhooks} == {
        f"{case}.webhooks.test.io" for case in ("deny", "fail", "ignore", "slow", "write", "silent")
    }
    [hook] = mutating.webhooks
    bundle = base64.b64decode(hook.client_config.ca_bundle)
    # The CA is the one kept in the Secret, for other replicas and the next start.
    secret = client.CoreV1Api(kube_api).read_namespaced_secret(ca_secret[1], ca_secret[0])
    assert base64.b64decode(secret.data["ca.crt"]) == bundle
    url = urlsplit(hook.client_config.url)
    assert url.scheme == "https" and url.path == "/mutate/mutate.webhooks.test.io"
    context = ssl.create_default_context(cadata=bundle.decode())
    with (
        socket.create_connection((url.hostname, url.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=url.hostname) as tls,
    ):
        assert tls.version() is not None  # the handshake verified the chain and the address
    untrusted = ssl.create_default_context()
    with (
        socket.create_connection((url.hostname, url.port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        untrusted.wrap_socket(raw, server_hostname=url.hostname)
