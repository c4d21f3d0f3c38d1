"""Flag values as the reference's users write them, read into typed values.

Go-style: `--leader-elect`, `--leader-elect=true`, `--inject-owner-ref=false`,
`--reconcile-period=1m30s`, sizes as `32Mi`. Each raises
argparse.ArgumentTypeError, which argparse reports with the flag's name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ansible_operator.values.durations import DurationError, parse_duration
from ansible_operator.values.sizes import SizeError, parse_size

TRUE = {"true", "1", "yes", "t"}
FALSE = {"false", "0", "no", "f"}


def go_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def go_duration(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def size(text: str) -> int:
    try:
        return parse_size(text)
    except SizeError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def checked_by(parse: Callable[[str], Any]) -> Callable[[str], str]:
    """A parser that keeps the text as given once ``parse`` accepts it; its
    ValueError becomes argparse's error."""

    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return text

    return check


def optional_path(text: str | None) -> Path | None:
    return Path(text) if text else None


def zero_is_none(value: Any) -> Any:
    """`0` given for a limit means no limit."""
    return value or None


def comma_list(environ: Mapping[str, str], name: str) -> list[str]:
    return [each.strip() for each in environ.get(name, "").split(",") if each.strip()]


def flattened(groups: list[list[str]]) -> tuple[str, ...]:
    """A repeated `NAME[,NAME]` flag's values, in the order given."""
    return tuple(name for names in groups for name in names)
