"""Hypothesis strategies for the objects users bring: JSON values with keys in every case
and separator and strings holding Jinja, YAML tags and pointers' escapes, and objects
valid under a CRD version's structural schema."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# Keys as people and tools write them: cases, separators, JSON pointer escapes, Jinja.
KEYS = st.one_of(
    st.sampled_from(
        ["a", "A", "fooBar", "foo_bar", "foo-bar", "foo.bar", "a/b", "~0", "~1", "{{ x }}", "é", ""]
    ),
    st.text(min_size=0, max_size=6),
)
TEXT = st.one_of(
    st.sampled_from(
        ["", "{{ lookup('pipe', 'id') }}", "!unsafe x", "https://h:1/p", "a:b:c", "://", "15"]
    ),
    st.text(max_size=12),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    TEXT,
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)


def value_of(schema: dict[str, Any] | None) -> st.SearchStrategy[Any]:
    """A value the schema validates (types, enums, patterns, minimums, required keys)."""
    if schema is None:
        return JSON
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return _mapping(schema)
    if kind == "array":
        return st.lists(value_of(schema.get("items")), max_size=3)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=False).filter(
                lambda text: len(text) >= schema.get("minLength", 0)
            )
        return TEXT.filter(lambda text: len(text) >= schema.get("minLength", 0))
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum", -(2**31)), max_value=2**31)
    if kind == "boolean":
        return st.booleans()
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    return JSON


def _mapping(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    base = st.fixed_dictionaries(
        {key: value_of(sub) for key, sub in properties.items() if key in required},
        optional={key: value_of(sub) for key, sub in properties.items() if key not in required},
    )
    extra: st.SearchStrategy[dict[str, Any]] | None = None
    if schema.get("x-kubernetes-preserve-unknown-fields") is True:
        extra = st.dictionaries(KEYS.filter(lambda key: key not in properties), JSON, max_size=3)
    elif isinstance(schema.get("additionalProperties"), dict):
        extra = st.dictionaries(
            KEYS.filter(lambda key: key not in properties),
            value_of(schema["additionalProperties"]),
            max_size=3,
        )
    if extra is None:
        return base
    return st.tuples(base, extra).map(lambda pair: {**pair[1], **pair[0]})


METADATA = st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)},
    optional={
        "namespace": st.just("team-a"),
        "uid": st.uuids().map(str),
        "resourceVersion": st.integers(1, 10**6).map(str),
        # The API server keeps no empty map of either (it gives none to convert).
        "labels": st.dictionaries(st.sampled_from(["app", "tier"]), TEXT, min_size=1, max_size=2),
        "annotations": st.dictionaries(
            st.sampled_from(["note", "example.com/x"]), TEXT, min_size=1, max_size=2
        ),
    },
)


def objects_of(
    api_version: str, kind: str, schema: dict[str, Any] | None
) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of `kind` valid under `schema` (a CRD version's openAPIV3Schema)."""
    properties = (schema or {}).get("properties") or {}
    body = {key: value_of(sub) for key, sub in properties.items() if key not in _META}
    return st.fixed_dictionaries(
        {"apiVersion": st.just(api_version), "kind": st.just(kind), "metadata": METADATA},
        optional=body,
    )


_META = frozenset({"apiVersion", "kind", "metadata"})
