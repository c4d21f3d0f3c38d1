"""What the proxy tells the operator about its runs: one `Write` record per
write, through one narrow interface (`DependentRegistry`; the operator's is
manager/dependents.py).

The record is handed over *before* the write is sent, and settled when the
API server has answered (before the run gets the answer). The API server
answers a write and publishes its change event at the same moment, on two
connections, so the operator's informer may deliver the event before the
proxy has read the answer. Told only afterwards, the registry would take the
event for someone else's change and run the owner again for nothing (or have
to wait a guessed while for the answer). Told before, it knows that a write
of that owner to that object is in flight, holds that owner's event until
the write settles, and then compares resourceVersions: the version the write
produced is the run's own doing; any other version is a change to act on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_operator.kube.types import Owner, Resource


def _pending() -> asyncio.Future[Mapping[str, Any] | None]:
    return asyncio.get_running_loop().create_future()


@dataclass(frozen=True)
class Write:
    """A run of `owner` writes (creates, replaces, patches) an object of `resource`."""

    resource: Resource
    owner: Owner
    namespace: str | None  # None: cluster-scoped, or named only in the body
    # None: a create to the collection; its event (ADDED) never re-runs an owner.
    name: str | None
    # The object as the API server returned it (None if the answer is not the
    # object); cancelled when the write did not happen (refused, failed, abandoned).
    written: asyncio.Future[Mapping[str, Any] | None] = field(default_factory=_pending)

    def succeeded(self, obj: Mapping[str, Any] | None) -> None:
        if not self.written.done():
            self.written.set_result(obj)

    def failed(self) -> None:
        self.written.cancel()  # no-op once settled

    @property
    def settled(self) -> bool:
        return self.written.done()

    @property
    def happened(self) -> bool:
        return self.written.done() and not self.written.cancelled()

    @property
    def object(self) -> Mapping[str, Any] | None:
        return self.written.result() if self.happened else None

    def when_settled(self, then: Callable[[Write], None]) -> None:
        self.written.add_done_callback(lambda _: then(self))


class DependentRegistry(Protocol):
    """The operator's dependent watches, as the proxy sees them."""

    def record(self, write: Write) -> None:
        """A run is about to send `write`; it settles once the server has answered."""

    def reads_cached(self, resource: Resource, owner: Owner) -> bool:
        """Whether a run of `owner` may read `resource` from the operator's cache."""
