"""Filters of the harbor_image_rewrite role: which HarborServerConfiguration rewrites a Pod's
images, and the rewritten images.

All of it is here, in Python, so the webhook role stays three tasks long (each task is latency
in the API server's path) and the image reference grammar is unit-tested
(tests/unit/test_image_rewrite_filters.py).

- `namespace | harbor_rewrite_choice(configurations)` -> {'configuration': HSC or None,
  'warnings': [...]}: the goharbor.io/image-rewrite and goharbor.io/secret-issuer annotations
  of the Pod's Namespace decide, as in Harbor's day-2 design.
- `pod | harbor_rewrite_pod(configuration)` -> the Pod with the images of its containers, init
  containers and ephemeral containers rewritten by the configuration's `rules`.
- `image | harbor_rewrite_image(configuration)` -> one image, rewritten or as it was.

A rule sends images to its `project`, or to the proxy-cache project of the `spec.proxyCache`
entry its `proxyCache` names (`docker.io/library/nginx` -> `<harbor host>/<that project>/
library/nginx`, which Harbor pulls from the upstream and caches).

The Pod and the Namespace come from the admission request: data, never templates. On
ansible-core 2.18 the results are wrapped unsafe so that they stay data wherever they go next;
from 2.19 on, nothing a filter returns is trusted as a template (and wrap_var cannot copy the
lazy containers filters are given there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ansible.errors import AnsibleFilterError
from ansible.release import __version__ as ansible_version

REWRITE = "goharbor.io/image-rewrite"
ISSUER = "goharbor.io/secret-issuer"
AUTO, DISABLED = "auto", "disabled"
DOCKER_HUB = "docker.io"
# Names Docker resolves to Docker Hub as well.
DOCKER_HUB_ALIASES = {"index.docker.io", "registry-1.docker.io"}
# The containers whose images a Pod pulls. Ephemeral ones (`kubectl debug`) come with an
# update of pods/ephemeralcontainers, where the API server keeps only their changes.
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


# Up to ansible-core 2.18, a string not wrapped unsafe is a template wherever it goes next.
WRAP_UNSAFE = tuple(int(part) for part in ansible_version.split(".")[:2]) < (2, 19)


def as_data(value: Any) -> Any:
    """What a filter returns, marked as never to be templated."""
    if not WRAP_UNSAFE:
        return value
    from ansible.utils.unsafe_proxy import wrap_var

    return wrap_var(value)


@dataclass(frozen=True)
class ImageReference:
    """`registry/path[:tag][@digest]`, Docker's reference grammar with its defaults filled in."""

    registry: str
    path: str
    tag: str = ""
    digest: str = ""

    @property
    def suffix(self) -> str:
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_image(image: str) -> ImageReference | None:
    """`nginx` -> docker.io/library/nginx; `localhost:5000/x` -> registry localhost:5000 (a
    port is not a tag). None for what is no image reference (empty, blanks, empty parts)."""
    if not image or any(c.isspace() for c in image):
        return None
    name, _, digest = image.partition("@")
    tag = ""
    last_slash, last_colon = name.rfind("/"), name.rfind(":")
    if last_colon > last_slash:  # a colon after the last slash starts the tag
        name, tag = name[:last_colon], name[last_colon + 1 :]
        if not tag:
            return None
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DOCKER_HUB, name
    if registry.lower() in DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not path or "" in path.split("/") or (digest == "" and "@" in image):
        return None
    return ImageReference(registry, path, tag, digest)


def harbor_host(configuration: dict[str, Any]) -> str:
    """`https://harbor.example.com:8443/x` -> `harbor.example.com:8443` (no scheme means
    https, as the HarborServerConfiguration CRD says)."""
    url = str((configuration.get("spec") or {}).get("serverURL") or "")
    host = urlsplit(url if "://" in url else f"https://{url}").netloc.rpartition("@")[2]
    if not host:
        raise AnsibleFilterError(
            f"HarborServerConfiguration {name_of(configuration)}: spec.serverURL {url!r} "
            "has no host to rewrite images to"
        )
    return host


def name_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "?")


def rewrite_image(image: str, configuration: dict[str, Any]) -> str:
    """The image in the project of the first rule whose `registryRegex` finds the image's
    registry: `<harbor host>/<project>/<path>[:tag][@digest]`; else the image as it was."""
    reference = parse_image(image)
    if reference is None:
        return image
    host = harbor_host(configuration)
    if reference.registry.lower() == host.lower():  # already in this Harbor
        return image
    rules = (configuration.get("spec") or {}).get("rules") or []
    for index, rule in enumerate(rules):
        pattern = str(rule.get("registryRegex", ""))
        project = rule_project(rule, index, configuration)
        try:
            matched = re.search(pattern, reference.registry) is not None
        except re.error as error:
            raise AnsibleFilterError(
                f"HarborServerConfiguration {name_of(configuration)}: "
                f"spec.rules[{index}].registryRegex {pattern!r} is no regular expression: {error}"
            ) from error
        if matched and project.strip("/"):
            return f"{host}/{project.strip('/')}/{reference.path}{reference.suffix}"
    return image


def rule_project(rule: dict[str, Any], index: int, configuration: dict[str, Any]) -> str:
    """The project a rule sends images to: its `project`, or the project of the
    `spec.proxyCache` entry it names. A proxy-cache project counts only once the status
    lists it as made in Harbor: until then the rule is passed over (an empty project), so
    the image is pulled from where it is rather than from a project not there yet."""
    if "proxyCache" not in rule:
        return str(rule.get("project", ""))
    name = str(rule["proxyCache"])
    spec, status = configuration.get("spec") or {}, configuration.get("status") or {}
    entry = next((e for e in spec.get("proxyCache") or [] if e.get("name") == name), None)
    if entry is None:
        raise AnsibleFilterError(
            f"HarborServerConfiguration {name_of(configuration)}: spec.rules[{index}].proxyCache "
            f"{name!r} names no entry of spec.proxyCache"
        )
    project = str(entry.get("project") or name)
    made = any(
        e.get("name") == name and e.get("project") == project and e.get("projectId")
        for e in status.get("proxyCache") or []
    )
    return project if made else ""


def rewrite_pod(pod: dict[str, Any], configuration: dict[str, Any] | None) -> dict[str, Any]:
    """The Pod with its (init, ephemeral) containers' images rewritten. Only what changes is
    copied: every other value stays the very object the request carried."""
    if not configuration:
        return pod
    spec = dict(pod.get("spec") or {})
    for field in CONTAINER_LISTS:
        containers = spec.get(field)
        if not containers:
            continue
        spec[field] = [
            {**container, "image": rewrite_image(container["image"], configuration)}
            if isinstance(container.get("image"), str)
            else container
            for container in containers
        ]
    return {**pod, "spec": spec}


def choose_configuration(
    namespace: dict[str, Any], configurations: list[dict[str, Any]]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The HSC whose rules apply to the namespace's Pods, and warnings for the client.

    - goharbor.io/image-rewrite=disabled: none;
    - =auto: the HSC named by goharbor.io/secret-issuer; if it does not exist (or none is
      named), the default one, with a warning saying so;
    - not set: the default HSC (spec.default: true);
    - any other value: none, with a warning (a mistyped `disabled` must not rewrite);
    - no default HSC: none, which means no rewriting.
    """
    meta = namespace.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    where = f"namespace {meta.get('name', '?')}"
    mode = annotations.get(REWRITE)
    if mode == DISABLED:
        return None, []
    if mode not in (None, AUTO):
        return None, [
            f"{where}: annotation {REWRITE}={mode!r} is neither {AUTO!r} nor {DISABLED!r}; "
            "images not rewritten"
        ]
    missing = None  # why `auto` falls back to the default HSC
    if mode == AUTO:
        issuer = annotations.get(ISSUER)
        named = [c for c in configurations if issuer and name_of(c) == issuer]
        if named:
            return named[0], []
        missing = (
            f"HarborServerConfiguration {issuer!r} (annotation {ISSUER}) does not exist"
            if issuer
            else f"annotation {ISSUER} is missing"
        )
    defaults = sorted(
        (c for c in configurations if (c.get("spec") or {}).get("default") is True),
        key=name_of,
    )
    warnings = []
    if missing:
        fallback = (
            f"using the default, {name_of(defaults[0])}"
            if defaults
            else "there is no default one: images not rewritten"
        )
        warnings.append(f"{where}: {REWRITE}=auto but {missing}; {fallback}")
    if not defaults:
        return None, warnings
    if len(defaults) > 1:
        warnings.append(
            "several HarborServerConfigurations are the default "
            f"({', '.join(name_of(c) for c in defaults)}); using {name_of(defaults[0])}"
        )
    return defaults[0], warnings


def harbor_rewrite_choice(
    namespace: dict[str, Any], configurations: list[dict[str, Any]]
) -> dict[str, Any]:
    configuration, warnings = choose_configuration(namespace or {}, configurations or [])
    return as_data({"configuration": configuration, "warnings": warnings})


def harbor_rewrite_pod(pod: dict[str, Any], configuration: dict[str, Any] | None) -> Any:
    return as_data(rewrite_pod(pod, configuration))


def harbor_rewrite_image(image: str, configuration: dict[str, Any] | None) -> Any:
    return as_data(rewrite_image(image, configuration) if configuration else image)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "harbor_rewrite_choice": harbor_rewrite_choice,
            "harbor_rewrite_pod": harbor_rewrite_pod,
            "harbor_rewrite_image": harbor_rewrite_image,
        }
