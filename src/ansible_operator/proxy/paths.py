"""Kubernetes API URL paths -> what they address."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourcePath:
    group: str
    version: str
    plural: str
    namespace: str | None  # None: cluster-scoped, or a list across all namespaces
    name: str | None
    subresource: str | None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def parse_resource_path(path: str) -> ResourcePath | None:
    """/api/v1/namespaces/ns/configmaps/x, /apis/apps/v1/deployments, ... or None
    for anything that is not a resource (discovery, /version, /openapi, ...).

    `/api/v1/namespaces/x` is the Namespace named x, not a namespace scope.
    """
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace: str | None = None
    namespace_subresource = len(rest) == 3 and rest[2] in ("status", "finalize")
    if rest[0] == "namespaces" and len(rest) >= 3 and not namespace_subresource:
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    subresource = "/".join(rest[2:]) if len(rest) >= 3 else None
    if plural == "watch":  # the deprecated /watch/ prefix: not served from cache
        return None
    return ResourcePath(group, version, plural, namespace, name, subresource)
