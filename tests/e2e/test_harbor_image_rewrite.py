"""Harbor day-2's image rewriting webhook (roles/harbor_image_rewrite): Pods created in a
namespace get their images pointed at a Harbor project by a HarborServerConfiguration's rules.

The sample operator serves the webhook to the real API server (a URL webhook on loopback, as
`ansible-operator run` on a workstation does). Each test makes its namespace and HSCs, creates
a Pod as kubectl does and reads it back as the API server stored it. No node here: creation is
what the webhook changes, the Pods never need to run (tests/node does that).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.testing.waiting import eventually

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = "goharbor.io", "v1alpha1", "harborserverconfigurations"
REWRITE, ISSUER = "goharbor.io/image-rewrite", "goharbor.io/secret-issuer"
EXEMPT = "goharbor.io/image-rewrite-exempt"
DIGEST = "sha256:" + "0123456789abcdef" * 4
HUB_TO_MIRROR = [{"registryRegex": "^docker.io$", "project": "mirror"}]
EXPLOIT = "{{ lookup('pipe', 'id') }}"


@pytest.fixture(scope="module")
def operator(
    sample_operator: Callable[..., OperatorProcess], kube_api: client.ApiClient
) -> Iterator[OperatorProcess]:
    process = sample_operator(
        "goharbor.io_harborserverconfigurations.yaml",
        "goharbor.io_pullsecretbindings.yaml",
        args=[
            "--webhook-bind-address=127.0.0.1:0",
            f"--webhook-configuration-name=image-rewrite-{uuid.uuid4().hex[:6]}",
            SERVE_METRICS,
        ],
    )
    wait_until_rewriting(kube_api)
    yield process
    # The bindings an issuer annotation asked for have a finalizer, which needs the operator.
    core = client.CoreV1Api(kube_api)

    def left() -> list[str]:
        return [
            n.metadata.name
            for n in core.list_namespace().items
            if n.metadata.name.startswith("rewrite-")
        ]

    eventually(lambda: not left(), timeout=60, describe=lambda: str(left()), what="namespaces gone")


class Harbor:
    """The test's namespaces and HarborServerConfigurations, all gone at its end."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.configurations: list[str] = []
        self.namespaces: list[str] = []

    def configuration(
        self, host: str, rules: list[dict[str, str]], *, default: bool = False
    ) -> str:
        name = f"hsc-{uuid.uuid4().hex[:8]}"
        self.custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "HarborServerConfiguration",
                "metadata": {"name": name},
                "spec": {
                    "serverURL": f"https://{host}",
                    "accessCredential": {"namespace": "default", "accessSecretRef": "none"},
                    "default": default,
                    "rules": rules,
                },
            },
        )
        self.configurations.append(name)
        return name

    def namespace(
        self, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None
    ) -> str:
        name = f"rewrite-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace(
            client.V1Namespace(
                metadata=client.V1ObjectMeta(name=name, annotations=annotations, labels=labels)
            )
        )
        self.namespaces.append(name)
        return name

    def clean_up(self) -> None:
        for name in self.configurations:
            self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        for name in self.namespaces:
            self.core.delete_namespace(name)
        # Gone only once the operator ran their finalizer; until then the webhook still
        # sees them, and a default one would rewrite the next test's Pods.
        eventually(
            lambda: not set(self.configurations) & self.existing(),
            timeout=60,
            describe=lambda: str(set(self.configurations) & self.existing()),
            what="HarborServerConfigurations deleted",
        )

    def existing(self) -> set[str]:
        listed = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        return {item["metadata"]["name"] for item in listed}


@pytest.fixture
def harbor(operator: OperatorProcess, kube_api: client.ApiClient) -> Iterator[Harbor]:
    made = Harbor(kube_api)
    yield made
    made.clean_up()


def pod(*images: str, init: tuple[str, ...] = (), **annotations: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=f"pod-{uuid.uuid4().hex[:6]}", annotations=annotations or None
        ),
        spec=client.V1PodSpec(
            init_containers=[
                client.V1Container(name=f"init{i}", image=image) for i, image in enumerate(init)
            ]
            or None,
            containers=[
                client.V1Container(
                    name=f"c{i}",
                    image=image,
                    env=[client.V1EnvVar(name="PAYLOAD", value=EXPLOIT)],
                )
                for i, image in enumerate(images)
            ],
        ),
    )


def create(api: client.ApiClient, namespace: str, body: client.V1Pod) -> tuple[client.V1Pod, str]:
    """Create as kubectl does: the Pod the API server stored, and its Warning header."""
    core = client.CoreV1Api(api)
    _, _, headers = core.create_namespaced_pod_with_http_info(namespace, body)
    stored = core.read_namespaced_pod(body.metadata.name, namespace)
    return stored, headers.get("Warning", "")


def images(stored: client.V1Pod) -> list[str]:
    return [c.image for c in stored.spec.containers]


def wait_until_rewriting(api: client.ApiClient) -> None:
    """The API server calls new webhook configurations a moment after they are made."""
    probe = Harbor(api)
    try:
        probe.configuration("probe.example.com", HUB_TO_MIRROR, default=True)
        namespace = probe.namespace()

        def rewritten() -> bool:
            dry = probe.core.create_namespaced_pod(namespace, pod("nginx"), dry_run="All")
            return images(dry) == ["probe.example.com/mirror/library/nginx"]

        eventually(rewritten, timeout=60, interval=0.5, what="the image-rewrite webhook served")
    finally:
        probe.clean_up()


# ----- which HarborServerConfiguration ------------------------------------------------
def test_auto_namespace_uses_its_issuers_rules(harbor: Harbor, kube_api: client.ApiClient) -> None:
    harbor.configuration("default.example.com", HUB_TO_MIRROR, default=True)
    issuer = harbor.configuration("issuer.example.com:8443", HUB_TO_MIRROR)
    namespace = harbor.namespace({REWRITE: "auto", ISSUER: issuer})

    stored, warning = create(kube_api, namespace, pod("nginx:1.25", note=EXPLOIT))

    assert images(stored) == ["issuer.example.com:8443/mirror/library/nginx:1.25"]
    assert warning == ""
    # The request's data reached the role as text and came back as it was: never templated.
    assert stored.metadata.annotations == {"note": EXPLOIT}
    assert stored.spec.containers[0].env[0].value == EXPLOIT


def test_default_configuration_rewrites_in_an_unannotated_namespace(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    harbor.configuration("harbor.example.com", HUB_TO_MIRROR, default=True)
    namespace = harbor.namespace()

    stored, _ = create(kube_api, namespace, pod("nginx", "bitnami/redis:7"))

    assert images(stored) == [
        "harbor.example.com/mirror/library/nginx",
        "harbor.example.com/mirror/bitnami/redis:7",
    ]


def test_disabled_namespace_keeps_its_images_despite_a_default(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    harbor.configuration("harbor.example.com", HUB_TO_MIRROR, default=True)
    namespace = harbor.namespace({REWRITE: "disabled"})

    stored, warning = create(kube_api, namespace, pod("nginx:1.25"))

    assert images(stored) == ["nginx:1.25"]
    assert warning == ""


def test_without_any_configuration_nothing_is_rewritten(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    namespace = harbor.namespace()

    stored, warning = create(kube_api, namespace, pod("nginx:1.25"))

    assert images(stored) == ["nginx:1.25"]
    assert warning == ""


def test_auto_naming_a_missing_configuration_without_default_admits_unchanged_with_a_warning(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    # Not the default either: only a default HSC applies to namespaces that name none.
    harbor.configuration("other.example.com", HUB_TO_MIRROR)
    namespace = harbor.namespace({REWRITE: "auto", ISSUER: "no-such-hsc"})

    stored, warning = create(kube_api, namespace, pod("nginx:1.25"))

    assert images(stored) == ["nginx:1.25"]
    assert (
        f"namespace {namespace}: goharbor.io/image-rewrite=auto but HarborServerConfiguration "
        "'no-such-hsc' (annotation goharbor.io/secret-issuer) does not exist; there is no "
        "default one: images not rewritten"
    ) in warning


def test_auto_naming_a_missing_configuration_falls_back_to_the_default(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    default = harbor.configuration("harbor.example.com", HUB_TO_MIRROR, default=True)
    namespace = harbor.namespace({REWRITE: "auto", ISSUER: "no-such-hsc"})

    stored, warning = create(kube_api, namespace, pod("nginx:1.25"))

    assert images(stored) == ["harbor.example.com/mirror/library/nginx:1.25"]
    assert f"does not exist; using the default, {default}" in warning


def test_exempt_namespace_is_never_sent_to_the_webhook(
    harbor: Harbor, kube_api: client.ApiClient, operator: OperatorProcess
) -> None:
    harbor.configuration("harbor.example.com", HUB_TO_MIRROR, default=True)
    exempt = harbor.namespace(labels={EXEMPT: "true"})
    other = harbor.namespace()

    def decided() -> float:
        return operator.metric(
            "ansible_operator_webhook_admissions_total", webhook="image-rewrite.goharbor.io"
        )

    before = decided()
    kept, _ = create(kube_api, exempt, pod("nginx:1.25"))
    after_exempt = decided()
    rewritten, _ = create(kube_api, other, pod("nginx:1.25"))

    assert images(kept) == ["nginx:1.25"]
    assert images(rewritten) == ["harbor.example.com/mirror/library/nginx:1.25"]
    # The operator counts each request it decides: it never heard of the exempt one.
    assert (after_exempt - before, decided() - after_exempt) == (0, 1)


# ----- which images, and how -------------------------------------------------------
def test_a_registry_no_rule_matches_keeps_its_image(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    harbor.configuration("harbor.example.com", HUB_TO_MIRROR, default=True)
    namespace = harbor.namespace()

    stored, _ = create(
        kube_api, namespace, pod("quay.io/prometheus/node-exporter:v1.8.0", "nginx:1.25")
    )

    assert images(stored) == [
        "quay.io/prometheus/node-exporter:v1.8.0",
        "harbor.example.com/mirror/library/nginx:1.25",
    ]


def test_init_containers_are_rewritten_too(harbor: Harbor, kube_api: client.ApiClient) -> None:
    harbor.configuration(
        "harbor.example.com",
        [
            {"registryRegex": r"^quay\.io$", "project": "quay"},
            {"registryRegex": "^docker.io$", "project": "mirror"},
        ],
        default=True,
    )
    namespace = harbor.namespace()

    stored, _ = create(
        kube_api, namespace, pod("nginx:1.25", init=("busybox:1.36", "quay.io/jetstack/init:1"))
    )

    assert [c.image for c in stored.spec.init_containers] == [
        "harbor.example.com/mirror/library/busybox:1.36",
        "harbor.example.com/quay/jetstack/init:1",
    ]
    assert images(stored) == ["harbor.example.com/mirror/library/nginx:1.25"]


def test_tags_digests_and_registry_ports_are_kept_apart(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    harbor.configuration(
        "harbor.example.com",
        [
            {"registryRegex": "^localhost:5000$", "project": "local"},
            {"registryRegex": "^docker.io$", "project": "mirror"},
        ],
        default=True,
    )
    namespace = harbor.namespace()

    stored, _ = create(
        kube_api,
        namespace,
        pod(
            f"library/nginx@{DIGEST}",
            f"nginx:1.25@{DIGEST}",
            "localhost:5000/team/app",
            "harbor.example.com/mirror/library/redis:7",  # already there
        ),
    )

    assert images(stored) == [
        f"harbor.example.com/mirror/library/nginx@{DIGEST}",
        f"harbor.example.com/mirror/library/nginx:1.25@{DIGEST}",
        "harbor.example.com/local/team/app",
        "harbor.example.com/mirror/library/redis:7",
    ]


def test_debug_containers_added_later_are_rewritten(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    harbor.configuration("harbor.example.com", HUB_TO_MIRROR, default=True)
    namespace = harbor.namespace()
    stored, _ = create(kube_api, namespace, pod("nginx:1.25"))

    # As `kubectl debug -it pod --image=busybox:1.36` adds one.
    debug = {"name": "debugger", "image": "busybox:1.36", "stdin": True, "tty": True}
    core = client.CoreV1Api(kube_api)
    core.patch_namespaced_pod_ephemeralcontainers(
        stored.metadata.name, namespace, {"spec": {"ephemeralContainers": [debug]}}
    )

    debugged = core.read_namespaced_pod(stored.metadata.name, namespace)
    assert [c.image for c in debugged.spec.ephemeral_containers] == [
        "harbor.example.com/mirror/library/busybox:1.36"
    ]
    assert images(debugged) == ["harbor.example.com/mirror/library/nginx:1.25"]


# ----- a configuration written in v1beta1 ---------------------------------------------
def test_a_configuration_written_in_v1beta1_rewrites_by_its_rules(
    harbor: Harbor, kube_api: client.ApiClient
) -> None:
    """v1beta1 writes rules as goharbor.io's v1beta1 does ("REGEX,PROJECT"); the sample's
    conversion role gives the webhook's role, which reads v1alpha1, its rule objects."""
    name = f"hsc-{uuid.uuid4().hex[:8]}"
    rules = ["^docker.io$,mirror", "^ghcr.io$,proxyCache=ghcr"]
    harbor.custom.create_cluster_custom_object(
        GROUP,
        "v1beta1",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/v1beta1",
            "kind": "HarborServerConfiguration",
            "metadata": {"name": name},
            "spec": {
                "serverURL": "https://beta.example.com",
                "accessCredential": {"namespace": "default", "accessSecretRef": "none"},
                "rules": rules,
            },
        },
    )
    harbor.configurations.append(name)
    as_hub = harbor.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    assert as_hub["spec"]["rules"] == [
        {"registryRegex": "^docker.io$", "project": "mirror"},
        {"registryRegex": "^ghcr.io$", "proxyCache": "ghcr"},
    ]
    assert (
        harbor.custom.get_cluster_custom_object(GROUP, "v1beta1", PLURAL, name)["spec"]["rules"]
        == rules
    )
    namespace = harbor.namespace({REWRITE: "auto", ISSUER: name})

    stored, _ = create(kube_api, namespace, pod("nginx:1.25"))

    assert images(stored) == ["beta.example.com/mirror/library/nginx:1.25"]
