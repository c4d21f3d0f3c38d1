"""Sizes as Kubernetes quantities write them: `512Mi`, `1Gi`, `64M`, `1048576`."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_SIZE = re.compile(r"(\d+)\s*(Ki|Mi|Gi|Ti|k|K|M|G|T)?B?")


class SizeError(ValueError):
    """A size string could not be parsed."""


def parse_size(text: str) -> int:
    """Bytes; 0 means "no limit" where a limit is asked for."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise SizeError(f"invalid size {text!r}: use a number of bytes or one like 512Mi or 1Gi")
    return int(match.group(1)) * _UNITS[match.group(2) or ""]


def format_size(size: int) -> str:
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if size >= _UNITS[unit] and size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    return f"{size}B"
