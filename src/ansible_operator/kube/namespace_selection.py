"""The namespaces whose labels match a selector (--watch-namespace-selector),
followed as labels change: a `NamespaceScope` fed by a label-selected watch of
Namespaces.

The API server filters a label-selected watch: a namespace relabelled to match
comes as ADDED, one relabelled out (or deleted) as DELETED. Both move the
scope, whose listeners (the informers, the controllers' queues) list the
namespace's objects or forget them.
"""

from __future__ import annotations

from typing import Any

from ansible_operator.kube.api import Api
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.namespace_scope import NamespaceScope
from ansible_operator.kube.types import Resource

NAMESPACES = Resource("", "v1", "Namespace", "namespaces", False)


class SelectedNamespaces(NamespaceScope):
    def __init__(self, api: Api, selector: str) -> None:
        super().__init__()
        self._every = False  # no namespace matches until the list says so
        self.selector = selector
        self._informer = Informer(
            api,
            NAMESPACES,
            label_selector=selector,
            on_event=self._on_namespace,
            name="namespaces-selected",
        )

    @property
    def dynamic(self) -> bool:
        return True

    def describe(self) -> str:
        return f"selector({self.selector}):{super().describe() if self.namespaces else '-'}"

    async def start(self) -> None:
        await self._informer.start()

    async def wait_synced(self) -> None:
        await self._informer.wait_synced()

    async def stop(self) -> None:
        await self._informer.stop()

    def _on_namespace(
        self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None, _listed: bool
    ) -> None:
        name = ((new or old or {}).get("metadata") or {}).get("name")
        if not name:
            return
        if event == "DELETED":
            self.leave(name)
        else:
            self.enter(name)
