"""Which namespaces the operator watches: every one, or a set of them.

`NamespaceScope` is the set the informers (kube/informer.py) and the cache
(kube/cache.py) ask about: every namespace (WATCH_NAMESPACE unset), a fixed
list (WATCH_NAMESPACE=a,b,c), or a set that changes as namespaces' labels do
(--watch-namespace-selector: kube/namespace_selection.py feeds this class).
Whoever keeps objects by namespace listens: a namespace that enters is listed
and its objects reconciled; one that leaves has its objects forgotten, as if
never seen (no DELETED: they were not deleted, and a deletion would run
finalizers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

log = logging.getLogger("ansible_operator.informer")
DESCRIBED = 20  # namespaces named in a log line; more are counted


class ScopeListener(Protocol):
    def namespace_entered(self, namespace: str) -> None: ...

    def namespace_left(self, namespace: str) -> None: ...


class NamespaceScope:
    """A fixed scope: every namespace (no names given) or the ones named."""

    def __init__(self, namespaces: Iterable[str] = ()) -> None:
        self._namespaces: set[str] = set(namespaces)
        self._every = not self._namespaces
        self._listeners: list[ScopeListener] = []

    @property
    def every(self) -> bool:
        """Whether every namespace is in scope."""
        return self._every

    @property
    def dynamic(self) -> bool:
        """Whether namespaces may enter or leave while the operator runs."""
        return False

    @property
    def namespaces(self) -> frozenset[str]:
        """The namespaces in scope now (empty when `every`)."""
        return frozenset(self._namespaces)

    def contains(self, namespace: str | None) -> bool:
        """Whether objects of `namespace` are in scope (None or "": a
        cluster-scoped object, in scope whatever the namespaces)."""
        return self._every or not namespace or namespace in self._namespaces

    def describe(self) -> str:
        """For a log line: the names, or how many when they are many."""
        if self._every:
            return "all"
        names = sorted(self._namespaces)
        shown = ",".join(names[:DESCRIBED])
        return shown if len(names) <= DESCRIBED else f"{shown},...({len(names)} namespaces)"

    # ----- listeners ---------------------------------------------------------
    def add_listener(self, listener: ScopeListener) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_listener(self, listener: ScopeListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def enter(self, namespace: str) -> None:
        """`namespace` is now in scope: listeners list its objects."""
        if self._every or namespace in self._namespaces:
            return
        self._namespaces.add(namespace)
        log.info("namespace entered the scope namespace=%s", namespace)
        for listener in list(self._listeners):
            self._tell(listener.namespace_entered, namespace)

    def leave(self, namespace: str) -> None:
        """`namespace` is out of scope: listeners forget its objects."""
        if self._every or namespace not in self._namespaces:
            return
        self._namespaces.discard(namespace)
        log.info("namespace left the scope, its objects forgotten namespace=%s", namespace)
        for listener in list(self._listeners):
            self._tell(listener.namespace_left, namespace)

    @staticmethod
    def _tell(method: Callable[[str], None], namespace: str) -> None:
        # One listener's bug must not keep the change from the others.
        try:
            method(namespace)
        except Exception:
            log.exception("namespace scope listener failed namespace=%s", namespace)

    # ----- lifecycle (a fixed scope has none) ----------------------------------
    async def start(self) -> None:
        return None

    async def wait_synced(self) -> None:
        return None

    async def stop(self) -> None:
        return None
