"""What a version's structural schema keeps of an object, as the API server prunes it.

The API server prunes a conversion's output with the target version's schema: a field the
schema does not declare is dropped, silently (unless `x-kubernetes-preserve-unknown-fields`
keeps the unknown fields of that mapping, or `additionalProperties` declares them all). So a
field one version has and another lacks is lost on the way, unless kept (fidelity.py).

`prune(value, schema)` is that pruning. `prune(value, to, known=from_schema)` gives the same
result for a value the schema `from_schema` already pruned (the API server gives us only
such objects), skipping every subtree where `to` keeps all that `from` keeps: a conversion
between two versions that differ in a few fields walks those fields, not the object.
`apiVersion`, `kind` and `metadata` at the top are never pruned here (the API server handles
metadata itself).
"""

from __future__ import annotations

from typing import Any

from ansible_operator.conversion.paths import Path

Schema = dict[str, Any]
ROOT_KEEPS = frozenset({"apiVersion", "kind", "metadata"})
_DROP: Any = object()  # a key the schema prunes
# None as a schema: nothing known about it, so nothing is pruned below.


def child(schema: Schema | None, key: str) -> Schema | None:
    """The schema of `key` in a mapping of `schema`; _DROP if pruned."""
    if schema is None:
        return None
    properties = schema.get("properties")
    if properties is not None and key in properties:
        return properties[key]
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        return additional
    if additional is True or schema.get("x-kubernetes-preserve-unknown-fields") is True:
        return None
    if schema.get("x-kubernetes-embedded-resource") is True and key in ROOT_KEEPS:
        return None
    return _DROP


def _unknown(schema: Schema | None) -> Schema | None:
    """The schema of a key `schema` does not name (_DROP if it prunes such keys)."""
    if schema is None:
        return None
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        return additional
    if additional is True or schema.get("x-kubernetes-preserve-unknown-fields") is True:
        return None
    return _DROP


def _items(schema: Schema | None) -> Schema | None:
    if schema is None:
        return None
    items = schema.get("items")
    return items if isinstance(items, dict) else None


UNKNOWN: Any = object()  # `known` not given: nothing can be skipped
Moved = dict[str, "Moved | bool"]  # paths written by a conversion, as a trie (True: here)


class _Node:
    """A schema as pruning reads it, worked out once per schema mapping."""

    __slots__ = ("items", "properties", "schema", "unknown")

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.properties: dict[str, Schema] = schema.get("properties") or {}
        self.unknown: Any = _unknown(schema)  # a schema, None (kept as is) or _DROP
        if self.unknown is _DROP and schema.get("x-kubernetes-embedded-resource") is True:
            self.unknown = _EMBEDDED
        self.items: Schema | None = _items(schema)


_EMBEDDED: Any = object()  # apiVersion, kind and metadata kept; other unknown keys dropped
_nodes: dict[int, _Node] = {}


def _node(schema: Schema) -> _Node:
    node = _nodes.get(id(schema))
    if node is None or node.schema is not schema:
        if len(_nodes) > 100_000:
            _nodes.clear()
        node = _nodes[id(schema)] = _Node(schema)
    return node


def prune(
    value: Any,
    schema: Schema | None,
    *,
    known: Schema | Any | None = UNKNOWN,
    moved: Moved | None = None,
    root: bool = False,
) -> Any:
    """`value` as `schema` keeps it (the same object when nothing is pruned). `known`: a
    schema `value` is already pruned by, except under `moved`, the paths a conversion
    wrote (their values came from elsewhere): see the module."""
    if schema is None:
        return value
    if known is not UNKNOWN and not moved and covers(known, schema):
        return value
    if isinstance(value, dict):
        node = _node(schema)
        properties, unknown = node.properties, node.unknown
        known_node = _node(known) if known is not UNKNOWN and known is not None else None
        out: dict[str, Any] | None = None
        for key, item in value.items():
            if root and key in ROOT_KEEPS:
                continue
            sub = properties.get(key, unknown)
            if sub is _EMBEDDED:
                sub = None if key in ROOT_KEEPS else _DROP
            if sub is _DROP:
                if out is None:
                    out = dict(value)
                del out[key]
                continue
            if sub is None or not isinstance(item, dict | list):
                continue  # kept as it is (below too), or a value with nothing below
            below = moved.get(key) if moved else None
            if below is True or known is UNKNOWN:
                sub_known: Any = UNKNOWN
                below = None
            elif known_node is None:  # `known` keeps everything here
                sub_known = None
            else:
                sub_known = known_node.properties.get(key, known_node.unknown)
                if sub_known is _EMBEDDED:
                    sub_known = None if key in ROOT_KEEPS else _DROP
                if sub_known is _DROP:  # not a key `known` keeps: it came from elsewhere
                    sub_known = UNKNOWN
            kept = prune(item, sub, known=sub_known, moved=below or None)  # type: ignore[arg-type]
            if kept is not item:
                if out is None:
                    out = dict(value)
                out[key] = kept
        return value if out is None else out
    if isinstance(value, list):
        sub = _items(schema)
        if sub is None:
            return value
        known_items = UNKNOWN if known is UNKNOWN else _items(known)
        pruned = [prune(item, sub, known=known_items) for item in value]
        if all(a is b for a, b in zip(pruned, value, strict=True)):
            return value
        return pruned
    return value


def moved_trie(paths: list[Path]) -> Moved:
    trie: Moved = {}
    for path in paths:
        node = trie
        for key in path[:-1]:
            sub = node.get(key)
            if sub is True:
                break
            if sub is None:
                sub = node[key] = {}
            node = sub  # type: ignore[assignment]
        else:
            node[path[-1]] = True
    return trie


_covered: dict[tuple[int, int], bool] = {}
_held: list[Any] = []  # the schemas of memoised answers, so their ids stay theirs


def covers(known: Schema | Any | None, schema: Schema | None) -> bool:
    """Whether `schema` keeps everything `known` keeps (so a value `known` pruned needs
    no pruning by `schema`)."""
    if schema is None:
        return True
    if known is None or known is _DROP:
        return known is _DROP
    key = (id(known), id(schema))
    answer = _covered.get(key)
    if answer is None:
        answer = _covers(known, schema)
        if len(_covered) > 100_000:
            _covered.clear()
            _held.clear()
        _covered[key] = answer
        _held.append((known, schema))
    return answer


def _covers(known: Schema, schema: Schema) -> bool:
    known_properties = known.get("properties") or {}
    schema_properties = schema.get("properties") or {}
    for key in known_properties:
        target = child(schema, key)
        if target is _DROP or not covers(known_properties[key], target):
            return False
    unknown = _unknown(known)
    if unknown is not _DROP:  # `known` keeps keys it does not name: so must `schema`
        target = _unknown(schema)
        if target is _DROP or not covers(unknown, target):
            return False
        for key, target in schema_properties.items():
            if key not in known_properties and not covers(unknown, target):
                return False
    if (
        known.get("x-kubernetes-embedded-resource") is True
        and not schema.get("x-kubernetes-embedded-resource")
        and any(child(schema, key) is _DROP for key in ROOT_KEEPS)
    ):
        return False
    known_items, schema_items = known.get("items"), schema.get("items")
    if isinstance(schema_items, dict):
        if not isinstance(known_items, dict):
            return False
        return covers(known_items, schema_items)
    return True


def at(schema: Schema | None, path: Path) -> Schema | Any | None:
    """The schema of the field at `path` (None: not pruned below; _DROP: pruned)."""
    node: Any = schema
    for key in path:
        node = child(node, key)
        if node is _DROP:
            return _DROP
    return node


def is_dropped(node: Any) -> bool:
    return node is _DROP


def version_schemas(crd: dict[str, Any]) -> dict[str, Schema | None]:
    """Each version of a CRD and its openAPIV3Schema (None: none, nothing pruned)."""
    spec = crd.get("spec") or {}
    shared = (spec.get("validation") or {}).get("openAPIV3Schema")
    found: dict[str, Schema | None] = {}
    for version in spec.get("versions") or []:
        if not isinstance(version, dict) or not isinstance(version.get("name"), str):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema", shared)
        found[version["name"]] = schema if isinstance(schema, dict) else None
    return found
