"""Value types for Kubernetes objects and kinds, shared by every layer above kube.

No I/O here: what a kind is (`GVK`), where the API serves it (`Resource`), and
which object a run works for (`Owner`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def api_version(group: str, version: str) -> str:
    """An object's apiVersion: `group/version`, or the version alone for the core group."""
    return f"{group}/{version}" if group else version


def group_of(api_version: str) -> str:
    """The group of an apiVersion: `apps` of `apps/v1`, the core group `""` of `v1`."""
    return api_version.rpartition("/")[0] if "/" in api_version else ""


@dataclass(frozen=True)
class GVK:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)

    @property
    def env_suffix(self) -> str:
        return f"{self.kind}_{self.group}".upper().replace(".", "_").replace("-", "_")

    def __str__(self) -> str:
        return (
            f"{self.kind}.{self.group}/{self.version}"
            if self.group
            else (f"{self.kind}/{self.version}")
        )


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: frozenset[str] = frozenset()
    subresources: frozenset[str] = field(default_factory=frozenset)

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


@dataclass(frozen=True)
class Owner:
    """The object a run works for."""

    group: str
    version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"
