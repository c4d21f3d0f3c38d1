"""A field's place in an object, and copy-on-write reads and writes of it.

A path is written `spec.database.replicas` in watches.yaml and held as a tuple of keys.
It goes through mappings only (a list is moved whole). The objects come from JSON and are
never changed in place: `placed` and `removed` return a new mapping along the path and share
everything else, so converting an object costs what its rules touch, not its size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Path = tuple[str, ...]


class _Missing:
    """No value at a path (distinct from a null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()
# What a conversion may not touch: the API server refuses any change of them but
# labels and annotations.
RESERVED_ROOTS = frozenset({"apiVersion", "kind", "metadata"})


class PathError(ValueError):
    """A path as written is not one."""


class Blocked(ValueError):
    """A value cannot be placed: something on its way is not a mapping."""

    def __init__(self, path: Path, at: Path, found: Any) -> None:
        self.path, self.at, self.found = path, at, found
        super().__init__(
            f"cannot place {dotted(path)}: {dotted(at)} holds {kind_of(found)}, not a mapping"
        )


def parse(text: str) -> Path:
    """`spec.database.replicas` -> ("spec", "database", "replicas")."""
    if not isinstance(text, str) or not text:
        raise PathError("a path must be a non-empty string such as spec.database.replicas")
    parts = tuple(text.split("."))
    if any(not part for part in parts):
        raise PathError(f"{text!r} has an empty part (two dots, or a dot at an end)")
    if any(char in part for part in parts for char in "[]*"):
        raise PathError(
            f"{text!r}: a path goes through mappings only (a list moves whole; to convert "
            "inside list items, convert with a role)"
        )
    if parts[0] in RESERVED_ROOTS:
        raise PathError(
            f"{text!r}: a conversion may not move {parts[0]} (the API server refuses any change "
            "of apiVersion, kind or metadata but labels and annotations)"
        )
    return parts


def dotted(path: Path) -> str:
    return ".".join(path) if path else "the object"


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "a number"


def overlaps(first: Path, second: Path) -> bool:
    """Whether one path is the other or inside it."""
    shorter = min(len(first), len(second))
    return first[:shorter] == second[:shorter]


def get(obj: Any, path: Path) -> Any:
    node = obj
    for key in path:
        if not isinstance(node, dict):
            return MISSING
        node = node.get(key, MISSING)
        if node is MISSING:
            return MISSING
    return node


def removed(
    obj: dict[str, Any], path: Path, *, drop_emptied: bool = True
) -> tuple[dict[str, Any], Any]:
    """`obj` without the value at `path` and that value (MISSING: there was none, and
    `obj` itself is returned). Mappings the removal leaves empty go too, unless not
    `drop_emptied`: a field moved out of `spec.old.x` leaves no `spec.old: {}` behind."""
    key = path[0]
    if key not in obj:
        return obj, MISSING
    if len(path) == 1:
        copy = dict(obj)
        return copy, copy.pop(key)
    child = obj[key]
    if not isinstance(child, dict):
        return obj, MISSING
    new_child, value = removed(child, path[1:], drop_emptied=drop_emptied)
    if value is MISSING:
        return obj, MISSING
    copy = dict(obj)
    if new_child or not drop_emptied:
        copy[key] = new_child
    else:
        del copy[key]
    return copy, value


def placed(obj: dict[str, Any], path: Path, value: Any, _done: Path = ()) -> dict[str, Any]:
    """`obj` with `value` at `path`, mappings made on the way (a null on the way counts as
    none); Blocked when something on the way is another value."""
    key = path[0]
    copy = dict(obj)
    if len(path) == 1:
        copy[key] = value
        return copy
    child = obj.get(key)
    if child is None:
        child = {}
    elif not isinstance(child, dict):
        raise Blocked((*_done, *path), (*_done, key), child)
    copy[key] = placed(child, path[1:], value, (*_done, key))
    return copy


def pointer(path: Path) -> str:
    """RFC 6901: ("spec", "a/b") -> "/spec/a~1b"."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def from_pointer(text: str) -> Path:
    if not isinstance(text, str) or not text.startswith("/"):
        raise PathError(f"{text!r} is not a JSON pointer")
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/"))


def same(first: Any, second: Any) -> bool:
    """JSON equality: `true` is not `1`, `1` is `1.0` as JSON has one number type."""
    if first is second:
        return True
    if isinstance(first, dict):
        return (
            isinstance(second, dict)
            and first.keys() == second.keys()
            and all(same(value, second[key]) for key, value in first.items())
        )
    if isinstance(first, list):
        return (
            isinstance(second, list)
            and len(first) == len(second)
            and all(same(a, b) for a, b in zip(first, second, strict=True))
        )
    if isinstance(first, bool) or isinstance(second, bool):
        return isinstance(first, bool) and isinstance(second, bool) and first == second
    if isinstance(first, int | float) and isinstance(second, int | float):
        return first == second
    return type(first) is type(second) and first == second


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE: Any = _Delete()
# An edit of a mapping: key -> DELETE, Set(value), or the edit of the mapping at that key.
Edits = dict[str, Any]


class Set:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Replace(dict):  # type: ignore[type-arg]
    """The edit of a mapping whose old value is deleted first (a source removed, then a
    target placed inside where it was)."""


def edits_of(removals: list[Path], placements: list[tuple[Path, Any]]) -> Edits:
    """One edit tree doing `removed` for each of `removals`, then `placed` for each of
    `placements`, as one pass (`edit`) copies each mapping touched once."""
    tree: Edits = {}
    for path in removals:
        node = tree
        for key in path[:-1]:
            sub = node.get(key)
            if sub is DELETE:
                break  # inside what is deleted anyway
            if sub is None:
                sub = node[key] = {}
            node = sub
        else:
            node[path[-1]] = DELETE
    for path, value in placements:
        node = tree
        for key in path[:-1]:
            sub = node.get(key)
            if sub is DELETE:
                sub = node[key] = Replace()
            elif sub is None or isinstance(sub, Set):
                sub = node[key] = {}
            node = sub
        node[path[-1]] = Set(value)
    return tree


def edit(obj: dict[str, Any], edits: Edits, _done: Path = ()) -> dict[str, Any]:
    """`obj` edited as `edits` says (see `edits_of`): the same mapping when nothing changes;
    mappings emptied by deletions removed; Blocked when a placement meets another value."""
    out: dict[str, Any] | None = None
    for key, change in edits.items():
        if change is DELETE:
            if key in obj:
                if out is None:
                    out = dict(obj)
                del out[key]
            continue
        if isinstance(change, Set):
            if out is None:
                out = dict(obj)
            out[key] = change.value
            continue
        if isinstance(change, Replace):
            child: Any = {}
        else:
            child = obj.get(key)
            if child is None:
                child = {}
            elif not isinstance(child, dict):
                if not _places(change):
                    continue  # only removals below a value that is not a mapping: none there
                raise Blocked(_first_placement((*_done, key), change), (*_done, key), child)
        new = edit(child, change, (*_done, key))
        if new is child:
            continue  # unchanged (or, where there was nothing, nothing placed)
        if out is None:
            out = dict(obj)
        if new or (not child and _places(change)):
            out[key] = new
        else:
            out.pop(key, None)  # emptied by the removals
    return obj if out is None else out


def _places(edits: Edits) -> bool:
    return any(
        isinstance(change, Set) or (isinstance(change, dict) and _places(change))
        for change in edits.values()
    )


def _first_placement(at: Path, edits: Edits) -> Path:
    for key, change in edits.items():
        if isinstance(change, Set):
            return (*at, key)
        if isinstance(change, dict) and _places(change):
            return _first_placement((*at, key), change)
    return at
