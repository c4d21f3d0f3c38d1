"""Which objects a watch event asks to reconcile: the primary object itself, or
the owners a dependent points to (by controller ownerReference or by the
owner annotations)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.controller.handlers import (
    OwnerKind,
    request_for_object,
    requests_for_owners,
)
from ansible_operator.controller.reconcile import ObjectKey

MEMCACHED = OwnerKind("cache.example.com", "Memcached")
CLUSTER_WIDE = OwnerKind("cache.example.com", "Fleet", namespaced=False)
FOLLOWS_STATUS = OwnerKind("cache.example.com", "Memcached", follow_status=True)
CORE_OWNER = OwnerKind("", "ConfigMap")


def reference(api_version: str, kind: str, name: str, *, controller: bool = True) -> dict:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": "u",
        "controller": controller,
    }


def dependent(
    *,
    namespace: str | None = "team",
    references: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    rv: str = "1",
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web", "resourceVersion": rv, "generation": 1}
    if namespace is not None:
        metadata["namespace"] = namespace
    if references is not None:
        metadata["ownerReferences"] = references
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec or {"replicas": 2}, "status": status or {}}


OWNED = [reference("cache.example.com/v1alpha1", "Memcached", "mc")]
ANNOTATED = {
    "operator-sdk/primary-resource": "other-team/mc",
    "operator-sdk/primary-resource-type": "Memcached.cache.example.com",
}


@pytest.mark.parametrize(
    ("event", "old", "new", "owners", "expected"),
    [
        pytest.param(
            "DELETED",
            None,
            dependent(references=OWNED),
            [MEMCACHED],
            [(MEMCACHED, ObjectKey("team", "mc"))],
            id="a deleted dependent re-runs its controller owner, in its namespace",
        ),
        pytest.param(
            "ADDED",
            None,
            dependent(references=OWNED),
            [MEMCACHED],
            [],
            id="a created dependent is the run's own doing",
        ),
        pytest.param(
            "MODIFIED",
            dependent(references=OWNED),
            dependent(references=OWNED, rv="2", spec={"replicas": 9}),
            [MEMCACHED],
            [(MEMCACHED, ObjectKey("team", "mc"))],
            id="drift in the spec re-runs the owner",
        ),
        pytest.param(
            "MODIFIED",
            dependent(references=OWNED),
            dependent(references=OWNED, rv="2", status={"ready": 1}),
            [MEMCACHED],
            [],
            id="a status change alone does not",
        ),
        pytest.param(
            "MODIFIED",
            dependent(references=OWNED),
            dependent(references=OWNED, rv="2", status={"ready": 1}),
            [FOLLOWS_STATUS],
            [(FOLLOWS_STATUS, ObjectKey("team", "mc"))],
            id="a status change does with watchDependentStatus",
        ),
        pytest.param(
            "MODIFIED",
            dependent(references=OWNED),
            dependent(references=OWNED, rv="2"),
            [MEMCACHED],
            [],
            id="a new resourceVersion alone does not",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(references=[{**OWNED[0], "controller": False}]),
            [MEMCACHED],
            [],
            id="a reference that is not the controller does not count",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(references=[reference("other.example.com/v1", "Memcached", "mc")]),
            [MEMCACHED],
            [],
            id="an owner of the same kind in another group is not ours",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(namespace=None, annotations=ANNOTATED),
            [MEMCACHED],
            [(MEMCACHED, ObjectKey("other-team", "mc"))],
            id="annotations point to an owner in another namespace",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(annotations={**ANNOTATED, "operator-sdk/primary-resource-type": "Fleet"}),
            [MEMCACHED],
            [],
            id="annotations of another owner kind do not count",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(references=[reference("cache.example.com/v1alpha1", "Fleet", "all")]),
            [CLUSTER_WIDE],
            [(CLUSTER_WIDE, ObjectKey("", "all"))],
            id="a cluster-scoped owner has no namespace",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(references=[reference("v1", "ConfigMap", "settings")]),
            [CORE_OWNER],
            [(CORE_OWNER, ObjectKey("team", "settings"))],
            id="an owner of the core group",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(references=OWNED),
            [CLUSTER_WIDE, MEMCACHED],
            [(MEMCACHED, ObjectKey("team", "mc"))],
            id="only the owners the dependent points to",
        ),
        pytest.param(
            "DELETED",
            None,
            dependent(),
            [MEMCACHED],
            [],
            id="an object nobody owns",
        ),
    ],
)
def test_which_owners_a_dependent_event_reconciles(
    event: str,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    owners: list[OwnerKind],
    expected: list[tuple[OwnerKind, ObjectKey]],
) -> None:
    assert requests_for_owners(event, old, new, owners) == expected


def primary(generation: int = 1, rv: str = "1", **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "mc",
            "namespace": "team",
            "generation": generation,
            "resourceVersion": rv,
            **metadata,
        },
        "spec": {"size": generation},
    }


@pytest.mark.parametrize(
    ("event", "old", "new", "watch_annotations", "expected"),
    [
        pytest.param("ADDED", None, primary(), False, ObjectKey("team", "mc"), id="created"),
        pytest.param(
            "MODIFIED", primary(1), primary(2, rv="2"), False, ObjectKey("team", "mc"), id="spec"
        ),
        pytest.param(
            "MODIFIED", primary(1), primary(1, rv="2"), False, None, id="bookkeeping only"
        ),
        pytest.param(
            "MODIFIED",
            primary(),
            primary(rv="2", annotations={"a": "b"}),
            False,
            None,
            id="annotations, not watched",
        ),
        pytest.param(
            "MODIFIED",
            primary(),
            primary(rv="2", annotations={"a": "b"}),
            True,
            ObjectKey("team", "mc"),
            id="annotations, watched",
        ),
        pytest.param(
            "DELETED",
            primary(),
            primary(),
            False,
            ObjectKey("team", "mc"),
            id="deleted: the reconcile finds it gone and forgets it",
        ),
        pytest.param(
            "ADDED",
            None,
            {"metadata": {"name": "fleet"}},
            False,
            ObjectKey("", "fleet"),
            id="cluster-scoped",
        ),
    ],
)
def test_which_primary_events_reconcile_the_object(
    event: str,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    watch_annotations: bool,
    expected: ObjectKey | None,
) -> None:
    assert request_for_object(event, old, new, watch_annotations=watch_annotations) == expected
