"""The command line, generated from the settings' declarations (settings/declare.py).

`add_flags` puts a flag on a parser for each declared setting (or the ones
named); `settings_from` reads the parsed flags and the environment back into
the sections. Adding a setting is one field in one section.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_operator.settings.declare import Declared, Parse, declared_in
from ansible_operator.settings.operator import Settings, sections
from ansible_operator.settings.parsers import go_bool


def every_setting() -> list[Declared]:
    return [each for name, cls in sections() for each in declared_in(name, cls)]


def flagged(only: Iterable[str] | None = None) -> list[Declared]:
    """The settings with a flag; ``only``: those whose first flag is named there."""
    wanted = set(only) if only is not None else None
    return [
        each
        for each in every_setting()
        if each.declaration.flags and (wanted is None or each.declaration.flag in wanted)
    ]


def add_flags(
    parser: argparse.ArgumentParser,
    *,
    only: Iterable[str] | None = None,
    parsers: Mapping[str, Parse] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """``parsers``: by flag, a parser the command supplies instead of the declared one,
    for a check that needs what the settings may not import (the runner's accelerations)."""
    for each in flagged(only):
        _add(parser, each, (parsers or {}).get(each.declaration.flag or ""), environ)


def _add(
    parser: argparse.ArgumentParser,
    each: Declared,
    parse: Parse | None,
    environ: Mapping[str, str],
) -> None:
    declared = each.declaration
    parse = parse or declared.parse
    default = each.default
    if declared.env and environ.get(declared.env):
        try:
            default = parse(environ[declared.env]) if parse else environ[declared.env]
        except argparse.ArgumentTypeError as error:
            parser.error(f"{declared.env} (the default of {declared.flags[0]}): {error}")
    options: dict[str, Any] = {"dest": each.dest, "help": declared.help}
    if declared.boolean:
        options.update(type=go_bool, nargs="?", const=True, default=default, metavar="BOOL")
        options["help"] = f"{declared.help} (default: {str(default).lower()})"
    elif declared.repeated:
        options.update(action="append", type=parse, default=[])
    else:
        options.update(type=parse, default=default, choices=declared.choices)
    if declared.metavar is not None:
        options["metavar"] = declared.metavar
    elif not declared.boolean:
        # argparse would show the dest (`RUNS.RUNNER_DIR`); show the flag's name instead.
        options["metavar"] = None if declared.choices else _flag_metavar(declared.flags[0])
    parser.add_argument(*declared.flags, **options)


def _flag_metavar(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_").upper()


def value_of(args: argparse.Namespace, each: Declared) -> Any:
    """The setting as the program uses it: given, read from the environment, or its default."""
    declared = each.declaration
    if declared.flags and hasattr(args, each.dest):
        value = getattr(args, each.dest)
        return declared.then(value) if declared.then else value
    return each.default


def flag_value(args: argparse.Namespace, flag: str) -> Any:
    (each,) = flagged([flag])
    return value_of(args, each)


def settings_from(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings a parser made by `add_flags` (every flag) read, with the environment's."""
    values: dict[str, dict[str, Any]] = {name: {} for name, _ in sections()}
    for each in every_setting():
        declared = each.declaration
        if declared.flags:
            values[each.section][each.name] = value_of(args, each)
        elif declared.from_env is not None:
            values[each.section][each.name] = declared.from_env(environ)
    return Settings(**{name: cls(**values[name]) for name, cls in sections()})
