"""The forms a secret value takes in a run's output, each made by the encoder
that makes it (json, urllib, html, repr, base64, Go's quoting as the API
server does it), for tests that look for every one of them where the value
must not appear. Independent of the redactor, which must find them all."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus


def json_escaped(value: str, *, ensure_ascii: bool = True) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii)[1:-1]


def go_quoted(value: str) -> str:
    """Go's %q of a printable string (the API server's "Invalid value: %q")."""
    return json_escaped(value, ensure_ascii=False)


def go_json_escaped(value: str) -> str:
    """Go's encoding/json: UTF-8 kept, `&<>` escaped for HTML."""
    escaped = json_escaped(value, ensure_ascii=False)
    return escaped.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def api_server_refusal_in_module_error(value: str) -> str:
    """How kubernetes.core's "Failed to create object: b'...'" shows a label
    value the API server refused: Go's %q, in its JSON answer, in a bytes repr."""
    return repr(go_json_escaped(go_quoted(value)).encode())[2:-1]


def repr_in_double_quotes(value: str) -> str:
    """A Python repr's body between double quotes (the quotes repr picks for a
    string with `'` and no `"`)."""
    shown = repr(value)
    if shown[0] == '"':
        return shown[1:-1]
    return shown[1:-1].replace("\\'", "'").replace('"', '\\"')


# One encoder each; base64 is taken of each of these.
ENCODINGS: dict[str, Callable[[str], str]] = {
    "as is": lambda value: value,
    "JSON": json_escaped,
    "JSON, UTF-8": lambda value: json_escaped(value, ensure_ascii=False),
    "JSON in JSON": lambda value: json_escaped(json_escaped(value)),
    "JSON in JSON, UTF-8": lambda value: json_escaped(
        json_escaped(value, ensure_ascii=False), ensure_ascii=False
    ),
    "url-encoded": lambda value: quote(value, safe=""),
    "url-encoded, path": quote,
    "url-encoded, form": quote_plus,
    "repr": lambda value: repr(value)[1:-1],
    "repr in double quotes": repr_in_double_quotes,
    "ascii()": lambda value: ascii(value)[1:-1],
    "bytes repr": lambda value: repr(value.encode())[2:-1],
    "HTML": html.escape,
}
# Case changes, and the layers real output stacks up.
DERIVED: dict[str, Callable[[str], str]] = {
    "upper-cased": str.upper,
    "lower-cased": str.lower,
    "Go JSON": go_json_escaped,
    "API server refusal in a module error": api_server_refusal_in_module_error,
    "that error in a JSON event": lambda value: json_escaped(
        api_server_refusal_in_module_error(value)
    ),
    "that event's repr in a log line": lambda value: repr(
        json_escaped(api_server_refusal_in_module_error(value))
    )[1:-1],
    "url-encoded twice": lambda value: quote(quote(value, safe=""), safe=""),
    "HTML in JSON": lambda value: json_escaped(html.escape(value)),
    "HTML twice": lambda value: html.escape(html.escape(value)),
    "terminal line ends": lambda value: value.replace("\n", "\r\n"),
}
NAMES = [*ENCODINGS, *DERIVED, *(f"base64 of {name}" for name in ENCODINGS)]


def forms(value: str) -> dict[str, str]:
    """Every form of `value` by name (NAMES)."""
    found = {name: encode(value) for name, encode in (ENCODINGS | DERIVED).items()}
    for name in ENCODINGS:
        found[f"base64 of {name}"] = base64.b64encode(found[name].encode()).decode()
    return found


def fragments(value: str) -> list[str]:
    """The value's runs of four letters or digits: no escaping changes them,
    so a text that holds one, whatever its case, holds part of the value."""
    return re.findall(r"[A-Za-z0-9]{4,}", value)
