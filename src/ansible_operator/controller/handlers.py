"""From a watch event to the objects to reconcile (controller-runtime's
pkg/handler, with pkg/predicate's filters from predicates.py): pure functions
of the event, no queue, no informer.

- The primary kind: the object itself (`EnqueueRequestForObject`), unless the
  update does not matter. A deletion is enqueued too: the reconcile then finds
  the object gone and forgets it. A deletion also stops the object's run in
  flight (`run_stop_reason`), as does the start of a deletion that leaves no
  finalizer of ours to run: that run's work is wasted, and its processes
  would go on for as long as the role takes.
- A dependent kind (`EnqueueRequestForOwner`): each owner it points to, by its
  controller ownerReference or by the owner annotations (for owners Kubernetes
  cannot reference: another namespace, a cluster-scoped dependent). Creates are
  the run's own doing (or a relist) and are ignored; deletes always count;
  updates unless only status or bookkeeping changed (status too with
  watchDependentStatus).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ansible_operator.controller.finalizers import has_finalizer
from ansible_operator.controller.predicates import dependent_update_matters, primary_update_matters
from ansible_operator.controller.reconcile import ObjectKey
from ansible_operator.proxy.ownership import owner_key_from

Object = dict[str, Any]


@dataclass(frozen=True)
class OwnerKind:
    """A watched kind whose runs made dependents, as the mapping needs it."""

    group: str
    kind: str
    namespaced: bool = True
    follow_status: bool = False  # watchDependentStatus


def request_for_object(
    event: str, old: Object | None, new: Object | None, *, watch_annotations: bool
) -> ObjectKey | None:
    """The primary object to reconcile for this event, or None."""
    obj = new if new is not None else old
    if obj is None:
        return None
    if event == "MODIFIED" and not primary_update_matters(
        old, obj, watch_annotations=watch_annotations
    ):
        return None
    return ObjectKey.of(obj)


def run_stop_reason(event: str, new: Object | None, finalizer: str | None) -> str | None:
    """Why this event of a primary object stops its run in flight, or None.
    `finalizer`: the watch's finalizer (its run follows a deletion: not stopped)."""
    if event == "DELETED":
        return "the object was deleted"
    if new is None or not (new.get("metadata") or {}).get("deletionTimestamp"):
        return None
    if finalizer is not None and has_finalizer(new, finalizer):
        return None
    return "the object is being deleted and has no finalizer of this operator to run"


def requests_for_owners(
    event: str, old: Object | None, new: Object | None, owners: Iterable[OwnerKind]
) -> list[tuple[OwnerKind, ObjectKey]]:
    """The owners to reconcile for an event of a dependent, among `owners`."""
    if event == "ADDED":
        return []
    obj = new if new is not None else old
    if obj is None:
        return []
    requests = []
    for owner in owners:
        found = owner_key_from(obj, owner.group, owner.kind, owner_namespaced=owner.namespaced)
        if found is None:
            continue
        if (
            event == "MODIFIED"
            and new is not None
            and not dependent_update_matters(old, new, follow_status=owner.follow_status)
        ):
            continue
        requests.append((owner, ObjectKey(*found)))
    return requests
