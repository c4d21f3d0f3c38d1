"""What a version's structural schema keeps of an object, as the API server prunes it, and
the shortcut that skips what two versions keep alike (it must prune exactly the same)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_operator.conversion import paths
from ansible_operator.conversion.schema import covers, moved_trie, prune, version_schemas

LEAVES = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer"},
        {"type": "object"},
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    ]
)
SCHEMAS = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.builds(
            lambda properties, preserve: {
                "type": "object",
                "properties": properties,
                **({"x-kubernetes-preserve-unknown-fields": True} if preserve else {}),
            },
            st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
            st.booleans(),
        ),
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda more: {"type": "object", "additionalProperties": more}, inner),
    ),
    max_leaves=10,
)
VALUES = st.recursive(
    st.one_of(st.integers(0, 3), st.text(max_size=2), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abcde"), inner, max_size=4)
    ),
    max_leaves=15,
)


def test_unknown_fields_are_dropped_where_the_schema_does_not_keep_them() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer"},
                    "items": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"a": {}}},
                    },
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            }
        },
    }
    obj = {
        "apiVersion": "v",
        "kind": "K",
        "metadata": {"name": "n", "anything": 1},
        "spec": {
            "size": 1,
            "gone": True,
            "items": [{"a": 1, "b": 2}],
            "free": {"x": {"y": 1}},
            "labels": {"k": "v"},
        },
        "status": {"x": 1},
    }
    assert prune(obj, schema, root=True) == {
        "apiVersion": "v",
        "kind": "K",
        "metadata": {"name": "n", "anything": 1},
        "spec": {"size": 1, "items": [{"a": 1}], "free": {"x": {"y": 1}}, "labels": {"k": "v"}},
    }
    kept = {"spec": {"size": 2}}
    assert prune(kept, schema) is kept  # nothing pruned: the same object


@settings(deadline=None, max_examples=400)
@given(SCHEMAS, SCHEMAS, VALUES)
def test_skipping_what_both_schemas_keep_prunes_exactly_as_a_full_walk(
    known: dict[str, Any], schema: dict[str, Any], raw: Any
) -> None:
    value = prune(raw, known)  # as the API server gives it: pruned by its own version
    assert prune(value, schema, known=known) == prune(value, schema)
    if covers(known, schema):
        assert prune(value, schema) == value


@settings(deadline=None, max_examples=400)
@given(
    SCHEMAS,
    SCHEMAS,
    st.dictionaries(st.sampled_from("abcde"), VALUES, max_size=4),
    st.lists(st.lists(st.sampled_from("abcde"), min_size=1, max_size=3).map(tuple), max_size=3),
    VALUES,
)
def test_values_a_conversion_moved_in_are_pruned_in_full(
    known: dict[str, Any],
    schema: dict[str, Any],
    raw: Any,
    places: list[tuple[str, ...]],
    moved_in: Any,
) -> None:
    value = prune(raw, known)
    for place in places:
        try:
            value = paths.placed(value, place, moved_in)
        except paths.Blocked:
            continue
    assert prune(value, schema, known=known, moved=moved_trie(places)) == prune(value, schema)


def test_a_crd_gives_each_version_its_schema() -> None:
    crd = {
        "spec": {
            "versions": [
                {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v2"},
            ]
        }
    }
    assert version_schemas(crd) == {"v1": {"type": "object"}, "v2": None}
