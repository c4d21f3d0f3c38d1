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

from ansible_operator.conversion.paths import MISSING, Path, Set, edit, edits_of, overlaps
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
    # Per direction, worked out once: the moves as (source, target) paths, the other
    # rules with theirs, the defaults of that side.
    _plans: dict[Side, _Plan] = field(default_factory=dict, compare=False, repr=False)

    def _plan(self, towards: Side) -> _Plan:
        plan = self._plans.get(towards)
        if plan is None:
            source_side = other(towards)
            moves = tuple(
                (rule.paths(source_side)[""], rule.paths(towards)[""])
                for rule in self.rules
                if isinstance(rule, Move)
            )
            splits = tuple(
                (rule, rule.paths(source_side), rule.paths(towards))
                for rule in self.rules
                if not isinstance(rule, Move)
            )
            defaults = tuple(d for d in self.defaults if d.side == towards)
            returning = tuple(d for d in self.defaults if d.side == source_side)
            sources = [rule.paths(source_side) for rule in self.rules]
            targets = [rule.paths(towards) for rule in self.rules]
            separate = not any(
                overlaps(a, b)
                for each in sources
                for a in each.values()
                for other_targets in targets
                for b in other_targets.values()
            )
            plan = self._plans[towards] = _Plan(moves, splits, defaults, returning, separate)
        return plan

    def convert(self, obj: dict[str, Any], towards: Side) -> dict[str, Any]:
        """`obj` (a spoke's object when `towards` is the hub, else the hub's) converted;
        its apiVersion is the caller's to set. Blocked: a value could not be placed.

        Every rule reads the object as given; then the sources of the rules that found
        something are removed (and mappings that leaves empty), their targets placed,
        and the defaults set where nothing is: one pass over what they touch."""
        return self.convert_checked(obj, towards)[0]

    def convert_checked(self, obj: dict[str, Any], towards: Side) -> tuple[dict[str, Any], bool]:
        """`convert`, and whether converting the result back gives `obj` again for sure
        (as far as the rules go: what the schemas prune is the caller's). False only
        means "not sure": the caller then converts back to find out (fidelity.py).

        Sure when: no rule's source overlaps another's target (the plan); every rule
        that fired placed its value where nothing was, into mappings that hold more
        than it (or that it made), and a join's parts read back as they were; no rule
        that did not fire finds something at its target; no default of either side
        fills anything in."""
        plan = self._plan(towards)
        exact = plan.separate
        removals: list[Path] = []
        placements: list[tuple[Path, Any]] = []
        for source, target in plan.moves:
            value = get_at(obj, source)
            if value is not MISSING:
                removals.append(source)
                placements.append((target, value))
                exact = exact and _vacant(obj, target)
            elif exact:
                exact = get_at(obj, target) is MISSING
        for rule, where, targets in plan.splits:
            values = {name: get_at(obj, path) for name, path in where.items()}
            out = rule.transform(values, towards)
            if out is None:
                exact = exact and all(get_at(obj, path) is MISSING for path in targets.values())
                continue
            removals += where.values()
            placements += [(targets[name], value) for name, value in out.items()]
            if exact:
                exact = all(_vacant(obj, path) for path in targets.values())
                if exact and towards == rule.whole_side:  # a join: do the parts come back?
                    exact = (
                        all(isinstance(value, str) for value in values.values())
                        and rule.format.split(out[""]) == values
                    )
        work = edit(obj, plan.edits(removals, placements)) if removals else obj
        for default in plan.defaults:
            if get_at(work, default.path) is MISSING:
                work = edit(work, edits_of([], [(default.path, default.value)]))
                exact = False
        if exact:
            exact = all(get_at(obj, default.path) is not MISSING for default in plan.returning)
        return work, exact


def _vacant(obj: dict[str, Any], path: Path) -> bool:
    """Nothing at `path`, and each mapping on the way that exists holds something (a value
    placed into an empty one would take it along when it is moved back out)."""
    node: Any = obj
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return True
        if not isinstance(node, dict) or not node:
            return False
    return isinstance(node, dict) and path[-1] not in node


@dataclass(frozen=True)
class _Plan:
    moves: tuple[tuple[Path, Path], ...]
    splits: tuple[tuple[Split, dict[str, Path], dict[str, Path]], ...]
    defaults: tuple[Default, ...]
    returning: tuple[Default, ...]  # the other side's: they fill in on the way back
    separate: bool  # no source of one rule overlaps a target of any
    # The edit tree for each set of places, values put in at each use (paths.edits_of
    # is the same tree made afresh: most objects of a kind fire the same rules).
    _trees: dict[tuple[tuple[Path, ...], tuple[Path, ...]], Any] = field(
        default_factory=dict, compare=False, repr=False
    )

    def edits(self, removals: list[Path], placements: list[tuple[Path, Any]]) -> Any:
        key = (tuple(removals), tuple(path for path, _ in placements))
        slots = self._trees.get(key)
        if slots is None:
            tree = edits_of(removals, [(path, None) for path, _ in placements])
            holders = _holders(tree, [path for path, _ in placements])
            if len(self._trees) < 256:
                self._trees[key] = slots = (tree, holders)
            else:
                slots = (tree, holders)
        tree, holders = slots
        for holder, (_, value) in zip(holders, placements, strict=True):
            holder.value = value
        return tree


def _holders(tree: Any, places: list[Path]) -> list[Set]:
    """The Set nodes of `tree` at `places`, in order (their values are filled at each use)."""
    found = []
    for path in places:
        node = tree
        for key in path[:-1]:
            node = node[key]
        found.append(node[path[-1]])
    return found
