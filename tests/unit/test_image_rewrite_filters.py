"""The Harbor image-rewrite sample's filters (roles/harbor_image_rewrite/filter_plugins):
Docker's image reference grammar, the rules, and which HarborServerConfiguration applies."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "roles/harbor_image_rewrite/filter_plugins/harbor_image_rewrite.py"


def load_plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harbor_image_rewrite_filters", PLUGIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


plugin = load_plugin()
DIGEST = "sha256:" + "ab" * 32


def hsc(
    name: str = "harbor",
    url: str = "https://harbor.example.com",
    rules: list[dict[str, str]] | None = None,
    default: bool = False,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "serverURL": url,
            "default": default,
            "rules": rules if rules is not None else [{"registryRegex": ".*", "project": "p"}],
        },
    }


def namespace(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "team", "annotations": annotations}}


@pytest.mark.parametrize(
    ("image", "registry", "path", "tag", "digest"),
    [
        ("nginx", "docker.io", "library/nginx", "", ""),
        ("nginx:1.25", "docker.io", "library/nginx", "1.25", ""),
        (f"library/nginx@{DIGEST}", "docker.io", "library/nginx", "", DIGEST),
        (f"nginx:1.25@{DIGEST}", "docker.io", "library/nginx", "1.25", DIGEST),
        ("bitnami/redis:7", "docker.io", "bitnami/redis", "7", ""),
        ("docker.io/nginx", "docker.io", "library/nginx", "", ""),
        ("index.docker.io/library/nginx", "docker.io", "library/nginx", "", ""),
        ("quay.io/x/y", "quay.io", "x/y", "", ""),
        ("quay.io/x/y:v2", "quay.io", "x/y", "v2", ""),
        ("localhost:5000/x", "localhost:5000", "x", "", ""),
        ("localhost:5000/x:1", "localhost:5000", "x", "1", ""),
        ("localhost/x", "localhost", "x", "", ""),
        ("registry:5000/team/app", "registry:5000", "team/app", "", ""),
        ("ghcr.io/org/team/app:v1", "ghcr.io", "org/team/app", "v1", ""),
        # `localhost` alone is an image on Docker Hub, as for docker.
        ("localhost", "docker.io", "library/localhost", "", ""),
    ],
)
def test_image_references_are_read_as_docker_reads_them(
    image: str, registry: str, path: str, tag: str, digest: str
) -> None:
    assert plugin.parse_image(image) == plugin.ImageReference(registry, path, tag, digest)


@pytest.mark.parametrize("image", ["", "nginx:", "nginx@", "a b", "quay.io//x", "/x"])
def test_what_is_no_image_reference_is_not_parsed(image: str) -> None:
    assert plugin.parse_image(image) is None


DOCKER_HUB_TO_MIRROR = hsc(rules=[{"registryRegex": "^docker.io$", "project": "mirror"}])


@pytest.mark.parametrize(
    ("image", "rewritten"),
    [
        ("nginx", "harbor.example.com/mirror/library/nginx"),
        ("nginx:1.25", "harbor.example.com/mirror/library/nginx:1.25"),
        (f"nginx@{DIGEST}", f"harbor.example.com/mirror/library/nginx@{DIGEST}"),
        (f"nginx:1.25@{DIGEST}", f"harbor.example.com/mirror/library/nginx:1.25@{DIGEST}"),
        ("docker.io/bitnami/redis:7", "harbor.example.com/mirror/bitnami/redis:7"),
        # No rule for these registries: as they were.
        ("quay.io/x/y:1", "quay.io/x/y:1"),
        ("localhost:5000/x", "localhost:5000/x"),
        # Already in this Harbor.
        ("harbor.example.com/mirror/library/nginx", "harbor.example.com/mirror/library/nginx"),
        ("harbor.example.com/other/app:1", "harbor.example.com/other/app:1"),
        # Not an image reference: left for the API server to refuse.
        ("", ""),
    ],
)
def test_images_of_a_matching_registry_move_to_the_rules_project(
    image: str, rewritten: str
) -> None:
    assert plugin.rewrite_image(image, DOCKER_HUB_TO_MIRROR) == rewritten


def test_the_first_matching_rule_wins() -> None:
    configuration = hsc(
        rules=[
            {"registryRegex": r"^quay\.io$", "project": "quay"},
            {"registryRegex": "docker", "project": "hub"},
            {"registryRegex": ".*", "project": "everything"},
        ]
    )
    assert plugin.rewrite_image("quay.io/a/b", configuration) == "harbor.example.com/quay/a/b"
    assert plugin.rewrite_image("nginx", configuration) == "harbor.example.com/hub/library/nginx"
    assert (
        plugin.rewrite_image("gcr.io/c/d:1", configuration) == "harbor.example.com/everything/c/d:1"
    )


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://harbor.example.com", "harbor.example.com"),
        ("harbor.example.com", "harbor.example.com"),  # https:// assumed, as the CRD says
        ("https://harbor.example.com:8443/", "harbor.example.com:8443"),
        ("http://10.0.0.5:30002/some/path", "10.0.0.5:30002"),
        ("https://user@harbor.example.com", "harbor.example.com"),
    ],
)
def test_the_harbor_host_is_the_server_urls_host_and_port(url: str, host: str) -> None:
    rewritten = plugin.rewrite_image("nginx:1", hsc(url=url))
    assert rewritten == f"{host}/p/library/nginx:1"
    # And an image already there stays.
    assert plugin.rewrite_image(rewritten, hsc(url=url)) == rewritten


def test_a_registry_under_a_port_is_matched_with_its_port() -> None:
    configuration = hsc(rules=[{"registryRegex": "^localhost:5000$", "project": "local"}])
    assert plugin.rewrite_image("localhost:5000/x:1", configuration) == (
        "harbor.example.com/local/x:1"
    )
    assert plugin.rewrite_image("localhost:5001/x:1", configuration) == "localhost:5001/x:1"


def test_a_bad_rule_is_an_error_naming_the_configuration_and_the_rule() -> None:
    configuration = hsc(
        name="broken",
        rules=[{"registryRegex": "^quay", "project": "q"}, {"registryRegex": "(", "project": "x"}],
    )
    with pytest.raises(AnsibleFilterError) as error:
        plugin.rewrite_image("nginx", configuration)
    assert "HarborServerConfiguration broken: spec.rules[1].registryRegex '('" in str(error.value)


def proxy_cached(made: list[dict[str, Any]]) -> dict[str, Any]:
    """Docker Hub through proxy-cache entry `hub` (project `hub-proxy`), quay.io to `quay`;
    `made` is the status.proxyCache the operator wrote."""
    configuration = hsc(
        rules=[
            {"registryRegex": "^docker.io$", "proxyCache": "hub"},
            {"registryRegex": ".*", "project": "everything"},
        ]
    )
    configuration["spec"]["proxyCache"] = [
        {
            "name": "hub",
            "type": "docker-hub",
            "endpointURL": "https://hub.docker.com",
            "project": "hub-proxy",
        }
    ]
    configuration["status"] = {"proxyCache": made}
    return configuration


def test_a_rule_naming_a_proxy_cache_moves_images_to_its_project_once_made() -> None:
    made = [{"name": "hub", "registryId": 3, "project": "hub-proxy", "projectId": 7}]
    assert plugin.rewrite_image("nginx:1.25", proxy_cached(made)) == (
        "harbor.example.com/hub-proxy/library/nginx:1.25"
    )


@pytest.mark.parametrize(
    "made",
    [
        [],  # not made yet
        [{"name": "hub", "registryId": 3, "project": "old-name", "projectId": 7}],  # renamed
    ],
)
def test_a_rule_naming_a_proxy_cache_not_made_is_passed_over(made: list[dict[str, Any]]) -> None:
    assert plugin.rewrite_image("nginx:1.25", proxy_cached(made)) == (
        "harbor.example.com/everything/library/nginx:1.25"
    )


def test_a_rule_naming_no_proxy_cache_entry_is_an_error_naming_the_rule() -> None:
    configuration = hsc(name="h", rules=[{"registryRegex": ".*", "proxyCache": "nope"}])
    with pytest.raises(AnsibleFilterError) as error:
        plugin.rewrite_image("nginx", configuration)
    assert "HarborServerConfiguration h: spec.rules[0].proxyCache 'nope' names no entry" in str(
        error.value
    )


def test_a_server_url_without_host_is_an_error_naming_the_configuration() -> None:
    with pytest.raises(AnsibleFilterError, match=r"HarborServerConfiguration h: spec.serverURL"):
        plugin.rewrite_image("nginx", hsc(name="h", url="https://"))


def test_pod_images_of_all_its_containers_are_rewritten_and_nothing_else() -> None:
    env = [{"name": "X", "value": "{{ lookup('pipe', 'id') }}"}]
    pod = {
        "metadata": {"name": "web", "annotations": {"a": "b"}},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox:1.36"}],
            "containers": [
                {"name": "web", "image": "nginx:1.25", "env": env},
                {"name": "side", "image": "quay.io/x/y:1"},
            ],
            "ephemeralContainers": [{"name": "debug", "image": "busybox:1.36"}],
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
    }
    rewritten = plugin.rewrite_pod(pod, DOCKER_HUB_TO_MIRROR)
    assert [c["image"] for c in rewritten["spec"]["initContainers"]] == [
        "harbor.example.com/mirror/library/busybox:1.36"
    ]
    assert [c["image"] for c in rewritten["spec"]["ephemeralContainers"]] == [
        "harbor.example.com/mirror/library/busybox:1.36"
    ]
    assert [c["image"] for c in rewritten["spec"]["containers"]] == [
        "harbor.example.com/mirror/library/nginx:1.25",
        "quay.io/x/y:1",
    ]
    # The request's Pod is not changed; what the rewrite does not touch is the request's own.
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert rewritten["metadata"] is pod["metadata"]
    assert rewritten["spec"]["volumes"] is pod["spec"]["volumes"]
    assert rewritten["spec"]["containers"][0]["env"] is env


def test_without_a_configuration_the_pod_is_the_requests() -> None:
    pod = {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    assert plugin.rewrite_pod(pod, None) is pod


ISSUER = hsc("issuer", "https://issuer.example.com")
DEFAULT = hsc("main", "https://main.example.com", default=True)


@pytest.mark.parametrize(
    ("annotations", "configurations", "chosen", "warning"),
    [
        ({}, [ISSUER, DEFAULT], "main", None),
        ({}, [ISSUER], None, None),
        ({}, [], None, None),
        (
            {"goharbor.io/image-rewrite": "auto", "goharbor.io/secret-issuer": "issuer"},
            [ISSUER, DEFAULT],
            "issuer",
            None,
        ),
        ({"goharbor.io/image-rewrite": "disabled"}, [ISSUER, DEFAULT], None, None),
        (
            {"goharbor.io/image-rewrite": "disabled", "goharbor.io/secret-issuer": "issuer"},
            [ISSUER, DEFAULT],
            None,
            None,
        ),
        # The issuer alone names where pull secrets come from, not a rewrite: the default.
        ({"goharbor.io/secret-issuer": "issuer"}, [ISSUER, DEFAULT], "main", None),
        (
            {"goharbor.io/image-rewrite": "auto", "goharbor.io/secret-issuer": "gone"},
            [ISSUER, DEFAULT],
            "main",
            "namespace team: goharbor.io/image-rewrite=auto but HarborServerConfiguration "
            "'gone' (annotation goharbor.io/secret-issuer) does not exist; using the default, "
            "main",
        ),
        (
            {"goharbor.io/image-rewrite": "auto", "goharbor.io/secret-issuer": "gone"},
            [ISSUER],
            None,
            "namespace team: goharbor.io/image-rewrite=auto but HarborServerConfiguration "
            "'gone' (annotation goharbor.io/secret-issuer) does not exist; there is no "
            "default one: images not rewritten",
        ),
        (
            {"goharbor.io/image-rewrite": "auto"},
            [DEFAULT],
            "main",
            "namespace team: goharbor.io/image-rewrite=auto but annotation "
            "goharbor.io/secret-issuer is missing; using the default, main",
        ),
        (
            {"goharbor.io/image-rewrite": "disable"},
            [DEFAULT],
            None,
            "namespace team: annotation goharbor.io/image-rewrite='disable' is neither "
            "'auto' nor 'disabled'; images not rewritten",
        ),
    ],
)
def test_the_namespace_annotations_choose_the_configuration(
    annotations: dict[str, str],
    configurations: list[dict[str, Any]],
    chosen: str | None,
    warning: str | None,
) -> None:
    configuration, warnings = plugin.choose_configuration(namespace(**annotations), configurations)
    assert (configuration or {}).get("metadata", {}).get("name") == chosen
    assert warnings == ([warning] if warning else [])


def test_of_several_defaults_the_first_by_name_is_used_with_a_warning() -> None:
    second = hsc("b-default", default=True)
    first = hsc("a-default", default=True)
    configuration, warnings = plugin.choose_configuration(namespace(), [second, first])
    assert configuration is first
    assert warnings == [
        "several HarborServerConfigurations are the default (a-default, b-default); using a-default"
    ]


def test_filters_answer_data_that_ansible_never_templates() -> None:
    if not plugin.WRAP_UNSAFE:
        pytest.skip("ansible-core 2.19+: strings a filter returns are never trusted as templates")
    from ansible.utils.unsafe_proxy import AnsibleUnsafe

    filters = plugin.FilterModule().filters()
    pod = {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    rewritten = filters["harbor_rewrite_pod"](pod, DOCKER_HUB_TO_MIRROR)
    auto = namespace(**{"goharbor.io/image-rewrite": "auto"})
    choice = filters["harbor_rewrite_choice"](auto, [DEFAULT])
    image = filters["harbor_rewrite_image"]("nginx", DOCKER_HUB_TO_MIRROR)
    assert image == "harbor.example.com/mirror/library/nginx"
    assert rewritten["spec"]["containers"][0]["image"] == image
    for text in (image, rewritten["spec"]["containers"][0]["image"], choice["warnings"][0]):
        assert isinstance(text, AnsibleUnsafe), type(text)
