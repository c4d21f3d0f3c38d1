"""How a setting is declared: once, on its section's dataclass field.

A section is a frozen dataclass; each field's default is the setting's default and
its metadata, made by `setting()`, says where a value comes from: the `run` flag(s)
(with the help text, the parser and the metavar argparse shows), an environment
variable that gives the flag its default, or the environment alone. The command
line (settings/flags.py) and the documentation test follow from these
declarations, as watches.yaml keys follow from `project/watch_fields.option`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

# argparse's `type`: text in, value out; raises argparse.ArgumentTypeError when wrong.
Parse = Callable[[str], Any]

_SPEC = "ansible_operator.setting"


@dataclass(frozen=True)
class Declaration:
    """Where one setting's value comes from, and how it is read."""

    flags: tuple[str, ...] = ()  # `--name` first, then aliases; (): no flag
    help: str | None = None
    parse: Parse | None = None
    metavar: str | None = None
    choices: Collection[Any] | None = None
    boolean: bool = False  # a Go-style flag: `--x`, `--x=true`, `--x=false`
    repeated: bool = False  # given many times, each value kept in order
    env: str | None = None  # the variable giving the flag's default, or the value itself
    from_env: Callable[[Mapping[str, str]], Any] | None = None  # no flag: read from here
    # The value as the program uses it, from the value as given (`0` meaning none, say).
    then: Callable[[Any], Any] | None = None

    @property
    def flag(self) -> str | None:
        return self.flags[0] if self.flags else None


def setting(*flags: str, **declared: Any) -> dict[str, Declaration]:
    """The metadata that declares a section's field a setting:
    ``field(default=..., metadata=setting("--flag", help=...))``."""
    return {_SPEC: Declaration(flags=flags, **declared)}


@dataclass(frozen=True)
class Declared:
    """One setting of one section."""

    section: str  # the section's attribute on Settings, e.g. "runs"
    name: str  # the field's name in the section, e.g. "reconcile_period"
    declaration: Declaration
    default: Any

    @property
    def dest(self) -> str:
        """argparse's attribute for it: unique across sections."""
        return f"{self.section}.{self.name}"


def default_of(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    raise TypeError(f"setting {field.name} has no default")


def declared_in(section: str, cls: type) -> list[Declared]:
    """Each setting declared on the section dataclass ``cls``, in order."""
    return [
        Declared(section, each.name, each.metadata[_SPEC], default_of(each))
        for each in dataclasses.fields(cls)
        if _SPEC in each.metadata
    ]
