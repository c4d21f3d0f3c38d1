"""Appending to a YAML list by editing the file's text, so its comments and layout stay.

PyYAML drops comments when it dumps, and `create api` edits files people write
in (watches.yaml, the RBAC role, kustomizations, PROJECT). So the new item is
written as text at the end of the list, and the result is parsed again: it must
be the old data with exactly that item appended, or nothing is changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

__all__ = ["YamlEditError", "append_to_list", "render_item"]

# Operator SDK's files carry markers such as `#+kubebuilder:scaffold:rules` where
# its own `create api` inserts: new items go before them too.
_SCAFFOLD_MARKER = "+kubebuilder:scaffold"
_DOCUMENT_MARKER = re.compile(r"^(---|\.\.\.)(\s|$)")
_EMPTY_FLOW_LIST = re.compile(r"^\[\s*\]\s*(#.*)?$")


class YamlEditError(Exception):
    """The list could not be found or extended as text; the message says why."""


class _ItemDumper(yaml.SafeDumper):
    """Block mappings, and lists of plain values on one line (`verbs: [get, list]`)."""

    def represent_list(self, data: list[Any]) -> yaml.Node:
        flat = all(not isinstance(value, dict | list) for value in data)
        return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)

    def represent_dict(self, data: dict[Any, Any]) -> yaml.Node:
        return self.represent_mapping("tag:yaml.org,2002:map", data, flow_style=False)

    def represent_str(self, data: str) -> yaml.Node:
        # `[""]`, as people write the core API group, rather than `['']`
        style = '"' if data == "" else None
        return self.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    def ignore_aliases(self, data: Any) -> bool:
        return True


_ItemDumper.add_representer(str, _ItemDumper.represent_str)
_ItemDumper.add_representer(list, _ItemDumper.represent_list)
_ItemDumper.add_representer(dict, _ItemDumper.represent_dict)


def render_item(item: Any, indent: int, comment: str | None = None) -> list[str]:
    """`item` as the lines of one block-list entry (`- ...`) at `indent`."""
    text = yaml.dump(item, Dumper=_ItemDumper, sort_keys=False, width=10_000)
    body = [line for line in text.splitlines() if line != "..."]
    pad = " " * indent
    lines = [f"{pad}# {part}\n" for part in comment.splitlines()] if comment else []
    lines.append(f"{pad}- {body[0]}\n")
    lines += [f"{pad}  {line}\n" for line in body[1:]]
    return lines


def append_to_list(
    text: str,
    item: Any,
    *,
    key: str | None = None,
    document: Callable[[Any], bool] | None = None,
    comment: str | None = None,
) -> str:
    """`text` with `item` appended to a list: the top-level `key` of the first YAML
    document for which `document(data)` is true (any, if not given), or that
    document's root list when `key` is None. A missing `key` is added."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    try:
        before = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise YamlEditError(f"not valid YAML: {error}") from None

    chunks = [
        (start, end, yaml.safe_load("".join(lines[start:end])))
        for start, end in _split_documents(lines)
    ]
    found = next(
        (n for n, chunk in enumerate(chunks) if document is None or document(chunk[2])), None
    )
    if found is None:
        raise YamlEditError("no document to add to")
    start, end, data = chunks[found]
    if key is not None and data is not None and not isinstance(data, dict):
        raise YamlEditError(f"the document is not a mapping, so it has no {key!r}")
    if key is None and data is not None and not isinstance(data, list):
        raise YamlEditError("the document is not a list")

    edited = lines[:start] + _append(lines[start:end], item, key, comment) + lines[end:]
    result = "".join(edited)
    _verify(before, result, found, item, key)
    return result


def _split_documents(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) line ranges of each document's body, markers excluded."""
    chunks: list[tuple[int, int]] = []
    start = 0
    for number, line in enumerate(lines):
        if _DOCUMENT_MARKER.match(line):
            if any(_is_content(part) for part in lines[start:number]):
                chunks.append((start, number))
            start = number + 1
    chunks.append((start, len(lines)))
    return chunks


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _append(lines: list[str], item: Any, key: str | None, comment: str | None) -> list[str]:
    content = [n for n, line in enumerate(lines) if _is_content(line)]
    if key is None:
        if not content:
            return [*lines, *render_item(item, 0, comment)]
        first = lines[content[0]]
        if _EMPTY_FLOW_LIST.match(first.strip()):
            # `[]` (as `init` writes): the first entry replaces it.
            rest = [line for n, line in enumerate(lines) if n != content[0]]
            return [*rest, *render_item(item, 0, comment)]
        if not first.lstrip().startswith("-"):
            raise YamlEditError("the document is not a block list (`- ...` lines)")
        at = _insertion_point(lines, content[-1], len(lines), _indent(first), whole=True)
        return lines[:at] + render_item(item, _indent(first), comment) + lines[at:]

    pattern = re.compile(rf"^{re.escape(key)}\s*:(?P<rest>.*)$")
    head = next((n for n in content if pattern.match(lines[n].rstrip("\n"))), None)
    if head is None:
        at = content[-1] + 1 if content else len(lines)
        return [*lines[:at], f"{key}:\n", *render_item(item, 0, comment), *lines[at:]]
    rest = pattern.match(lines[head].rstrip("\n")).group("rest").strip()  # type: ignore[union-attr]
    empty = bool(_EMPTY_FLOW_LIST.match(rest))
    if rest and not empty and not rest.startswith("#"):
        raise YamlEditError(f"{key!r} is not a block list (`- ...` lines)")
    if empty:
        trailing = rest[rest.index("#") :] if "#" in rest else ""
        lines = [*lines[:head], f"{key}:{' ' + trailing if trailing else ''}\n", *lines[head + 1 :]]

    last, item_indent, end = head, None, len(lines)
    for number in range(head + 1, len(lines)):
        line = lines[number]
        if not _is_content(line):
            continue
        if _indent(line) > 0 or line.startswith("-"):
            last = number
            if item_indent is None and line.lstrip().startswith("-"):
                item_indent = _indent(line)
            continue
        end = number
        break
    if item_indent is None:
        item_indent = 0
    at = _insertion_point(lines, last, end, item_indent, whole=False)
    return lines[:at] + render_item(item, item_indent, comment) + lines[at:]


def _insertion_point(lines: list[str], last: int, end: int, item_indent: int, whole: bool) -> int:
    """After the list's last line and the comments that belong to it: those
    indented like its items (or any, when the list is the whole document), up
    to a scaffold marker."""
    at = last + 1
    for number in range(last + 1, end):
        line = lines[number]
        if _SCAFFOLD_MARKER in line:
            break
        if not line.strip():
            continue
        if line.strip().startswith("#") and (whole or _indent(line) >= max(item_indent, 1)):
            at = number + 1
            continue
        break
    return at


def _verify(before: list[Any], result: str, index: int, item: Any, key: str | None) -> None:
    try:
        after = list(yaml.safe_load_all(result))
    except yaml.YAMLError as error:
        raise YamlEditError(f"the edit would not be valid YAML: {error}") from None
    docs = list(before)
    target = docs[index] if index < len(docs) else None
    if key is None:
        new: Any = [*(target or []), item]
    else:
        new = dict(target or {})
        new[key] = [*(new.get(key) or []), item]
    docs[index : index + 1] = [new]
    if after != docs:
        raise YamlEditError("the edit did not give the expected data (unusual layout)")
