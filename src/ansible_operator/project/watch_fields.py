"""The pieces a ``watches.yaml`` key is declared with, and typed reading of its YAML value.

A watch option is declared once, on its ``Watch`` attribute: a dataclass field whose default
is the option's default and whose metadata is `option()`, which names the key as written in
the file, the reader (its type, validation and error text) and any environment variable that
overrides it. The loader, the list of known keys and the "did you mean" suggestions all follow
from those declarations.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ansible_operator.values.durations import DurationError, parse_duration

# A reader turns a value node into the attribute's value, or records an error and returns
# None; None (an error, or a value meaning "unset" such as a zero duration) keeps the default.
Read = Callable[[Any, yaml.Node, str], Any]

_SPEC = "ansible_operator.watch_option"
INVALID = object()  # what `NodeReader.construct` returns for a value YAML cannot build


@dataclass(frozen=True)
class EnvOverride:
    """Environment variables, one of ``templates`` formatted with the watch's
    ``GVK.env_suffix``, that override an integer option; the first one set wins."""

    templates: tuple[str, ...]
    minimum: int
    maximum: int | None = None

    @property
    def requirement(self) -> str:
        if self.maximum is not None:
            return f"an integer {self.minimum}..{self.maximum}"
        return "a positive integer" if self.minimum == 1 else f"an integer >= {self.minimum}"

    def parse(self, raw: str) -> int | None:
        try:
            value = int(raw.strip())
        except ValueError:
            return None
        if value < self.minimum or (self.maximum is not None and value > self.maximum):
            return None
        return value


@dataclass(frozen=True)
class Option:
    """How one ``Watch`` attribute is read: from ``key`` in the file (None: from the
    environment only), with ``read``, and overridden by ``env``."""

    key: str | None
    read: Read | None
    env: EnvOverride | None = None


def option(
    key: str | None, read: Read | None = None, *, env: EnvOverride | None = None
) -> dict[str, Option]:
    """The metadata that declares a ``Watch`` attribute an option of the watches file:
    ``field(default=..., metadata=option(...))``."""
    return {_SPEC: Option(key, read, env)}


def options_of(cls: type) -> list[tuple[str, Option]]:
    """(attribute, option) for each option declared on the dataclass ``cls``, in order."""
    return [
        (each.name, each.metadata[_SPEC])
        for each in dataclasses.fields(cls)
        if _SPEC in each.metadata
    ]


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


class NodeReader:
    """Reads YAML nodes into typed values, collecting every problem as ``LABEL:LINE: message``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.errors: list[str] = []
        self._yaml = yaml.SafeLoader("")

    def error(self, node: yaml.Node | int, message: str) -> None:
        line = node if isinstance(node, int) else node.start_mark.line + 1
        self.errors.append(f"{self.label}:{line}: {message}")

    def where(self, node: yaml.Node) -> str:
        return f"{self.label}:{node.start_mark.line + 1}"

    def construct(self, node: yaml.Node) -> Any:
        try:
            return self._yaml.construct_document(node)
        except yaml.YAMLError as exc:
            self.error(node, f"invalid value: {exc}")
            return INVALID

    def fields(
        self, node: yaml.MappingNode, known: tuple[str, ...], what: str
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Map canonical key name -> (key node, value node); report unknown/duplicate keys."""
        by_lower = {name.lower(): name for name in known}
        found: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str) or key == "":
                self.error(key_node, f"{what}: keys must be non-empty strings")
                continue
            canonical = by_lower.get(key.lower())
            if canonical is None:
                message = f"unknown key {key!r}"
                if what != "watch":
                    message = f"{what}: {message}"
                close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
                if close:
                    message += f" (did you mean {by_lower[close[0]]!r}?)"
                else:
                    message += f"; known keys: {', '.join(known)}"
                self.error(key_node, message)
                continue
            if canonical in found:
                first = found[canonical][0]
                self.error(
                    key_node,
                    f"{what}: key {key!r} is given twice (first at line "
                    f"{first.start_mark.line + 1}; keys ignore case)",
                )
                continue
            found[canonical] = (key_node, value_node)
        return found

    def string(self, node: yaml.Node, name: str, *, empty_ok: bool = False) -> str | None:
        value = self.construct(node)
        if value is INVALID:
            return None
        if value is None and empty_ok:
            return ""
        if not isinstance(value, str):
            self.error(node, f"{name!r} must be a string, not {describe(value)}")
            return None
        if not value and not empty_ok:
            self.error(node, f"{name!r} must not be empty")
            return None
        return value

    def boolean(self, node: yaml.Node, name: str) -> bool | None:
        value = self.construct(node)
        if value is INVALID:
            return None
        if not isinstance(value, bool):
            self.error(node, f"{name!r} must be true or false, not {describe(value)}")
            return None
        return value

    def integer(self, node: yaml.Node, name: str, *, minimum: int) -> int | None:
        value = self.construct(node)
        if value is INVALID:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(node, f"{name!r} must be an integer, not {describe(value)}")
            return None
        if value < minimum:
            bound = "positive" if minimum == 1 else f"at least {minimum}"
            self.error(node, f"{name!r} must be {bound}, not {value}")
            return None
        return value

    def duration(self, node: yaml.Node, name: str) -> float | None:
        """A Go duration, or a number of seconds. 0 (or absent) gives None."""
        value = self.construct(node)
        if value is INVALID or value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            self.error(
                node,
                f"{name!r} must be a duration like 30s, 5m or 1h30m, not {describe(value)}",
            )
            return None
        if isinstance(value, int | float):
            if value < 0:
                self.error(node, f"{name!r} must not be negative, not {value}")
                return None
            seconds = float(value)
        else:
            try:
                seconds = parse_duration(value)
            except DurationError as exc:
                self.error(node, f"{name!r}: {exc}")
                return None
        return seconds or None

    def names(self, node: yaml.Node, name: str) -> tuple[str, ...] | None:
        """A list of variable names (an empty value: none)."""
        value = self.construct(node)
        if value is INVALID:
            return None
        if value is None:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(each, str) and each.isidentifier() for each in value
        ):
            self.error(node, f"{name!r} must be a list of variable names, not {describe(value)}")
            return None
        return tuple(value)

    def mapping(self, node: yaml.Node, name: str) -> dict[str, Any] | None:
        value = self.construct(node)
        if value is INVALID:
            return None
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(node, f"{name!r} must be a mapping, not {describe(value)}")
            return None
        bad = [key for key in value if not isinstance(key, str)]
        if bad:
            self.error(node, f"{name!r}: keys must be strings, not {describe(bad[0])}")
            return None
        return value


def count(minimum: int) -> Read:
    """A reader for an integer of at least ``minimum``."""

    def read(reader: NodeReader, node: yaml.Node, name: str) -> int | None:
        return reader.integer(node, name, minimum=minimum)

    return read


def between(minimum: int, maximum: int) -> Read:
    """A reader for an integer from ``minimum`` to ``maximum``."""

    def read(reader: NodeReader, node: yaml.Node, name: str) -> int | None:
        value = reader.integer(node, name, minimum=minimum)
        if value is not None and value > maximum:
            reader.error(node, f"{name!r} must be at most {maximum}, not {value}")
            return None
        return value

    return read


def choice(*allowed: str) -> Read:
    """A reader for one of the strings ``allowed``, written exactly as Kubernetes spells it."""

    def read(reader: NodeReader, node: yaml.Node, name: str) -> str | None:
        value = reader.construct(node)
        if value is INVALID:
            return None
        if value not in allowed:
            message = f"{name!r} must be {' or '.join(allowed)}, not {describe(value)}"
            close = [each for each in allowed if str(value).lower() == each.lower()]
            if value is None and "None" in allowed:
                message += " (write the word None; an empty value or null is no value)"
            elif close:
                message += f" (did you mean {close[0]!r}?)"
            reader.error(node, message)
            return None
        return value

    return read
