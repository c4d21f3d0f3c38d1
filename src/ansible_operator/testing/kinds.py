"""One custom API group's kinds, by kind name: create, get, patch, delete, wait.

Each test operator (the runtime's, the fault suite's, the attack suite's)
declares its group once as a `CustomKinds`, and its tests say `kinds.create(api,
namespace, "Work", "w1", size=2)` instead of the five positional arguments of
`CustomObjectsApi`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from ansible_operator.testing.waiting import get_custom, wait_for_condition


@dataclass(frozen=True)
class CustomKinds:
    group: str
    version: str
    plurals: Mapping[str, str]  # kind -> plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def body(
        self, kind: str, name: str, *, annotations: Mapping[str, str] | None = None, **spec: Any
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if annotations:
            metadata["annotations"] = dict(annotations)
        return {"apiVersion": self.api_version, "kind": kind, "metadata": metadata, "spec": spec}

    def create(
        self,
        api: client.ApiClient,
        namespace: str,
        kind: str,
        name: str,
        *,
        annotations: Mapping[str, str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        return self.create_body(
            api, namespace, self.body(kind, name, annotations=annotations, **spec)
        )

    def create_body(
        self, api: client.ApiClient, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Create `body` as written (its kind picks the plural)."""
        return client.CustomObjectsApi(api).create_namespaced_custom_object(
            self.group, self.version, namespace, self.plurals[body["kind"]], body
        )

    def get(
        self, api: client.ApiClient, namespace: str, kind: str, name: str
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        return get_custom(api, self.group, self.version, self.plurals[kind], namespace, name)

    def patch_spec(
        self, api: client.ApiClient, namespace: str, kind: str, name: str, spec: dict[str, Any]
    ) -> None:
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            self.group, self.version, namespace, self.plurals[kind], name, {"spec": spec}
        )

    def delete(self, api: client.ApiClient, namespace: str, kind: str, name: str) -> None:
        client.CustomObjectsApi(api).delete_namespaced_custom_object(
            self.group, self.version, namespace, self.plurals[kind], name
        )

    def wait_for_condition(
        self,
        api: client.ApiClient,
        namespace: str,
        kind: str,
        name: str,
        condition: str,
        status: str = "True",
        **options: Any,
    ) -> dict[str, Any]:
        """The object once its condition `condition` has `status` (see `waiting`)."""
        return wait_for_condition(
            api,
            self.group,
            self.version,
            self.plurals[kind],
            namespace,
            name,
            condition,
            status,
            **options,
        )
