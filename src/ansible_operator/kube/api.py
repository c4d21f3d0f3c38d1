"""What the operator asks of the Kubernetes API: the one interface its parts are written
against, implemented by the real client (kube/client.py's ApiClient) and by the one fake
the unit tests use (testing/fake_api.py's FakeApi).

A part that needs more than this (raw requests, the session, the upstreams a run's proxy
forwards to) takes an ApiClient; every other part takes an `Api`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol

from ansible_operator.kube.types import Resource

PatchType = Literal["merge", "strategic", "json", "apply"]


class Api(Protocol):
    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard_selector: str | None = None,
    ) -> dict[str, Any]: ...

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def replace(
        self,
        resource: Resource,
        name: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str = ...,
        force: bool = False,
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
    ) -> dict[str, Any]: ...

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of a watch (an async generator)."""
        ...

    async def current_generation(self) -> int:
        """Which API server connection this is: it changes when the kubeconfig moves."""
        ...

    async def pause(self, seconds: float) -> None:
        """Wait `seconds`, or less if the API server connection changes meanwhile."""
        ...
