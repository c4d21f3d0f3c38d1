"""A `fieldMap`: how one version's objects become the hub's and back, declared as data.

Each rule reads the same both ways (`hub` and `spoke` name where a value lives in each):

    - {hub: spec.database.replicas, spoke: spec.inClusterDatabase.replicas}   # a move
    - hub: spec.externalURL                                                   # a split
      spoke: {scheme: spec.expose.scheme, host: spec.expose.host}
      format: "{scheme}://{host}"
    - {hub: spec.database.version, default: "15"}                             # a default

A move takes the value (whatever it is: a mapping, a list) from one place to the other. A
split joins the parts with the format one way and cuts the whole with it the other way; a
placeholder takes as much as it can, so `{image}:{tag}` cuts at the last colon. A default
is set, converting to its side, where nothing else put a value. Fields no rule names stay
where they are: the target version's schema decides whether it holds them (schema.py), and
what it cannot hold is kept by fidelity.py.

A rule that finds nothing to convert does nothing: its source is absent, or a split meets a
value its format does not fit (left where it was, so nothing is lost). Converting never
changes the input: `convert` returns a new object sharing what the rules did not touch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ansible_operator.conversion.paths import MISSING, Path, edit, edits_of
from ansible_operator.conversion.paths import get as get_at

Side = Literal["hub", "spoke"]
HUB: Side = "hub"
SPOKE: Side = "spoke"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def other(side: Side) -> Side:
    return SPOKE if side == HUB else HUB


class FormatError(ValueError):
    pass


@dataclass(frozen=True)
class Format:
    """`{scheme}://{host}`: literal text between named placeholders."""

    text: str
    names: tuple[str, ...]
    literals: tuple[str, ...]  # one more than names: before, between and after them
    pattern: re.Pattern[str] = field(compare=False)

    @classmethod
    def parse(cls, text: str) -> Format:
        names: list[str] = []
        literals: list[str] = []
        at = 0
        for match in _PLACEHOLDER.finditer(text):
            literals.append(text[at : match.start()])
            names.append(match.group(1))
            at = match.end()
        literals.append(text[at:])
        if len(names) < 2:
            raise FormatError(
                f"format {text!r} needs two placeholders or more, such as '{{scheme}}://{{host}}'"
            )
        if len(set(names)) != len(names):
            raise FormatError(f"format {text!r} names a placeholder twice")
        for literal in literals:
            if "{" in literal or "}" in literal:
                raise FormatError(
                    f"format {text!r}: a placeholder is a name in braces, such as {{host}}; "
                    "braces cannot appear otherwise"
                )
        for index, literal in enumerate(literals[1:-1], start=1):
            if not literal:
                raise FormatError(
                    f"format {text!r}: {{{names[index - 1]}}} and {{{names[index]}}} need text "
                    "between them, or no one could tell where one ends"
                )
        regex = re.escape(literals[0]) + "".join(
            f"(?P<{name}>.*){re.escape(literal)}"
            for name, literal in zip(names, literals[1:], strict=True)
        )
        return cls(text, tuple(names), tuple(literals), re.compile(regex, re.DOTALL))

    def join(self, values: Mapping[str, str]) -> str:
        out = [self.literals[0]]
        for name, literal in zip(self.names, self.literals[1:], strict=True):
            out.append(values[name])
            out.append(literal)
        return "".join(out)

    def split(self, text: str) -> dict[str, str] | None:
        match = self.pattern.fullmatch(text)
        return match.groupdict() if match is not None else None


@dataclass(frozen=True)
class Move:
    hub: Path
    spoke: Path
    source: str = ""  # watches.yaml:LINE

    def paths(self, side: Side) -> dict[str, Path]:
        return {"": self.hub if side == HUB else self.spoke}

    def transform(self, values: dict[str, Any], towards: Side) -> dict[str, Any] | None:
        value = values[""]
        return None if value is MISSING else {"": value}


def _text(value: Any) -> str | None:
    """A part as the format writes it: text, or a whole number."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


@dataclass(frozen=True)
class Split:
    """One field on one side, its parts on the other."""

    hub: Path | dict[str, Path]
    spoke: Path | dict[str, Path]
    format: Format
    source: str = ""

    @property
    def whole_side(self) -> Side:
        return HUB if isinstance(self.hub, tuple) else SPOKE

    def paths(self, side: Side) -> dict[str, Path]:
        where = self.hub if side == HUB else self.spoke
        return {"": where} if isinstance(where, tuple) else dict(where)

    def transform(self, values: dict[str, Any], towards: Side) -> dict[str, Any] | None:
        if towards == self.whole_side:  # join the parts
            if all(value is MISSING for value in values.values()):
                return None
            parts = {
                name: "" if value is MISSING else _text(value) for name, value in values.items()
            }
            if any(part is None for part in parts.values()):
                return None  # a part no format can write: left where it is
            return {"": self.format.join(parts)}  # type: ignore[arg-type]
        whole = values[""]
        if not isinstance(whole, str):
            return None
        return self.format.split(whole)


@dataclass(frozen=True)
class Default:
    side: Side  # set converting to this side
    path: Path
    value: Any
    source: str = ""


Rule = Move | Split


@dataclass(frozen=True)
class FieldMap:
    rules: tuple[Rule, ...] = ()
    defaults: tuple[Default, ...] = ()
    source: str = ""

    def convert(self, obj: dict[str, Any], towards: Side) -> dict[str, Any]:
        """`obj` (a spoke's object when `towards` is the hub, else the hub's) converted;
        its apiVersion is the caller's to set. Blocked: a value could not be placed.

        Every rule reads the object as given; then the sources of the rules that found
        something are removed (and mappings that leaves empty), their targets placed,
        and the defaults set where nothing is: one pass over what they touch."""
        source_side = other(towards)
        removals: list[Path] = []
        placements: list[tuple[Path, Any]] = []
        for rule in self.rules:
            where = rule.paths(source_side)
            values = {name: get_at(obj, path) for name, path in where.items()}
            out = rule.transform(values, towards)
            if out is None:
                continue
            removals += where.values()
            targets = rule.paths(towards)
            placements += [(targets[name], value) for name, value in out.items()]
        work = edit(obj, edits_of(removals, placements)) if removals else obj
        for default in self.defaults:
            if default.side == towards and get_at(work, default.path) is MISSING:
                work = edit(work, edits_of([], [(default.path, default.value)]))
        return work
