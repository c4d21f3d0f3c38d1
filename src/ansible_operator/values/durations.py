"""Go-style durations (``time.ParseDuration``): ``300ms``, ``1.5h``, ``1h30m``."""

from __future__ import annotations

import re

_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_HINT = "use a number with a unit, like 30s, 5m or 1h30m"


class DurationError(ValueError):
    """A duration string could not be parsed."""


def parse_duration(text: str, *, bare_number_unit: str | None = None) -> float:
    """Parse a Go duration string and return seconds.

    A bare number (``"30"``) is accepted only when ``bare_number_unit`` names the unit
    to use for it (for example ``"s"``). ``"0"`` is always accepted.
    """
    if not isinstance(text, str):
        raise DurationError(f"invalid duration {text!r}: {_HINT}")
    raw = text
    text = text.strip()
    if not text:
        raise DurationError(f"invalid duration {raw!r}: it is empty; {_HINT}")
    if text.startswith("-"):
        raise DurationError(f"invalid duration {raw!r}: it must not be negative")
    if text.startswith("+"):
        text = text[1:]
    if text == "0":
        return 0.0
    if _NUMBER.fullmatch(text):
        if bare_number_unit is None:
            raise DurationError(f"invalid duration {raw!r}: missing unit; {_HINT}")
        if bare_number_unit not in _UNITS:
            raise ValueError(f"unknown duration unit {bare_number_unit!r}")
        return float(text) * _UNITS[bare_number_unit]
    total = 0.0
    position = 0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None:
            raise DurationError(f"invalid duration {raw!r}: {_HINT} (units: ns, us, ms, s, m, h)")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return total


def format_duration(seconds: float) -> str:
    """Format seconds the way Go prints a ``time.Duration``: ``1h30m``, ``500ms``, ``0s``."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds == 0:
        return "0s"
    if seconds < 1:
        nanos = round(seconds * 1e9)
        if nanos < 1_000:
            return f"{nanos}ns"
        if nanos < 1_000_000:
            return f"{_trim(nanos / 1_000)}µs"
        return f"{_trim(nanos / 1_000_000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    secs = round(secs, 9)
    if secs >= 60:  # rounding carried over
        secs -= 60
        minutes += 1
    if minutes >= 60:
        minutes -= 60
        hours += 1
    out = ""
    if hours:
        out += f"{int(hours)}h"
    if minutes or (hours and secs):
        out += f"{int(minutes)}m"
    if secs or not out:
        out += f"{_trim(secs)}s"
    return out


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"
