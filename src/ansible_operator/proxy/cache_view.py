"""What the proxy reads from the operator's informers (kube/cache.py): the
objects of a kind, and the place to note what a run just wrote."""

from __future__ import annotations

from typing import Any, Protocol

from ansible_operator.kube.types import Resource


class ObjectCache(Protocol):
    def view(self, resource: Resource, namespace: str | None) -> CachedKind | None: ...


class CachedKind(Protocol):
    # False: a shard ring's replica's share of the kind (what it lacks may
    # exist elsewhere): a GET it holds is answered, the rest forwarded.
    complete: bool

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def list(
        self, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> list[dict[str, Any]]: ...

    @property
    def resource_version(self) -> str: ...

    def remember(self, obj: dict[str, Any], *, deleted: bool = False) -> None: ...
