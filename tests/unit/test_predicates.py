"""Which primary-object updates trigger a reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.controller.predicates import primary_update_matters


def obj(generation: int | None = 1, **changes: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "x", "resourceVersion": changes.pop("rv", "1")}
    if generation is not None:
        metadata["generation"] = generation
    metadata.update(changes.pop("metadata", {}))
    return {
        "metadata": metadata,
        "spec": changes.pop("spec", {"a": 1}),
        "status": changes.pop("status", {}),
    }


@pytest.mark.parametrize(
    ("old", "new", "annotations", "expected"),
    [
        (obj(1), obj(2, spec={"a": 2}), False, True),
        (obj(1), obj(1, rv="2", status={"x": 1}), False, False),
        (obj(1), obj(1, metadata={"annotations": {"a": "b"}}), False, False),
        (obj(1), obj(1, metadata={"annotations": {"a": "b"}}), True, True),
        (obj(1), obj(1, metadata={"labels": {"a": "b"}}), False, False),
        (obj(1), obj(1, metadata={"deletionTimestamp": "now"}), False, True),
        (obj(1), obj(1, metadata={"finalizers": ["x"]}), False, False),
        (obj(None), obj(None, spec={"a": 2}), False, True),
        (obj(None), obj(None, rv="9", metadata={"managedFields": [{}]}), False, False),
        (obj(None), obj(None, metadata={"labels": {"l": "1"}}), False, True),
        (None, obj(1), False, True),
    ],
    ids=[
        "generation-changed",
        "status-only",
        "annotation-ignored",
        "annotation-watched",
        "labels-only",
        "deletion-started",
        "finalizer-added",
        "no-generation-data-changed",
        "no-generation-bookkeeping-only",
        "no-generation-labels",
        "unknown-old",
    ],
)
def test_primary_update_matters(old: Any, new: Any, annotations: bool, expected: bool) -> None:
    assert primary_update_matters(old, new, watch_annotations=annotations) is expected
