"""YAML as PyYAML's node tree, for checks that must name the line of what they find.

Ansible's own tags (`!unsafe`, `!vault`) are kept as plain strings: composing
needs no constructor for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "compose_file",
    "get",
    "is_string",
    "items",
    "line_of",
    "scalar",
    "strings",
]

_STR = "tag:yaml.org,2002:str"
_constructor = yaml.SafeLoader("")


def compose_file(path: Path) -> yaml.Node | None:
    """The file's (first) document as nodes; None when empty. Raises yaml.YAMLError."""
    return yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def is_string(node: yaml.Node | None) -> bool:
    """A scalar read as a string (quoted, plain text, or one of Ansible's tags)."""
    return isinstance(node, yaml.ScalarNode) and (
        node.tag == _STR or not node.tag.startswith("tag:yaml.org,2002:")
    )


def scalar(node: yaml.ScalarNode) -> Any:
    """The Python value of a scalar (`3` -> 3, `yes` -> True, `!unsafe x` -> 'x')."""
    if not node.tag.startswith("tag:yaml.org,2002:"):
        return node.value
    try:
        return _constructor.construct_object(node, deep=True)
    except yaml.YAMLError:
        return node.value


def items(node: yaml.Node | None) -> list[tuple[str, yaml.Node, yaml.Node]]:
    """(key, key node, value node) of a mapping with scalar keys; [] otherwise."""
    if not isinstance(node, yaml.MappingNode):
        return []
    return [
        (str(key.value), key, value)
        for key, value in node.value
        if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge"
    ]


def get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    return next((value for name, _, value in items(node) if name == key), None)


def strings(node: yaml.Node | None) -> Iterator[yaml.ScalarNode]:
    """Every string scalar under `node` (values only, not mapping keys)."""
    if node is None:
        return
    if is_string(node):
        yield node  # type: ignore[misc]
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from strings(child)
    elif isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            yield from strings(value)
