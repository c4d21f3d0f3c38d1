"""Every form a sensitive value takes on its way out of a run, and one
regular expression per value that finds them all.

Output quotes a value through layers of escaping: the API server quotes a
refused label value (Go's %q) in its JSON answer, kubernetes.core puts that
answer's bytes repr in its error, Ansible puts the error in a JSON event and
the operator logs its repr. A list of forms would multiply with each layer;
instead each character of the value is spelt every way an encoder writes it,
at any depth:

- as is, case aside (the match ignores case: upper- and lower-cased forms);
- after a backslash, doubled by each layer of JSON or repr (`\\"`, `\\\\\\"`):
  `\\n`, `\\u00e4` (JSON's ensure_ascii; Go's JSON writes `&<>` so),
  `\\xe4` (ascii()), `\\xc3\\xa4` (a bytes repr: the UTF-8 bytes);
- percent-encoded (`quote`; `quote_plus` writes a space `+`; `%25` per layer);
- as an HTML entity (`&quot;`, `&#228;`, `&auml;`; `&amp;` per layer).

Base64 cannot be spelt character by character: the base64 of the value's
whole forms (as is, JSON once and twice, url-encoded, repr, HTML) is listed,
at each of the three alignments it can have inside a longer base64 text.

Output is long and values many: an expression runs on a text only if the
text holds a run of plain characters (or of base64) that every form of the
value holds. Repetitions are possessive (`++`) and a run of backslashes is
entered at its start only: one pass over the output, whatever the value (no
catastrophic backtracking).
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass
from html.entities import codepoint2name
from urllib.parse import quote, quote_plus

# No encoder changes these: they are spelt as is.
_PLAIN = frozenset(string.ascii_letters + string.digits + "_.-~")
_PLAIN_RUN = re.compile(r"[A-Za-z0-9_.~-]+")
# An escape's backslash, doubled at each layer. A run is matched from its
# start only: from each of its n backslashes it would cost n steps.
_BACKSLASHES = r"(?<!\\)\\++"
_AMPERSAND = rf"(?:&|{_BACKSLASHES}u0026|%(?:25)*+26)(?:amp;)*+"  # an entity's `&`, at any depth
_SHORT_ESCAPES = {"\n": "n", "\r": "r", "\t": "t", "\b": "b", "\f": "f", "\a": "a", "\v": "v"}
_ENTITIES = {**codepoint2name, ord("'"): "apos"}
_MIN_BASE64_CORE = 4  # shorter runs of base64 letters turn up by chance
_MIN_RUN = 3  # a value without a run this long is looked for in every text
# JSON may carry a lone surrogate ("\ud800"), which strict UTF-8 refuses.
_LONE_SURROGATES = "surrogatepass"


@dataclass(frozen=True)
class ValueForms:
    """One value's forms: an expression for all of them, and runs of text one
    of which each form holds, to skip the expression on most texts (hundreds
    of case-insensitive alternations tried at every position of a long output
    take seconds; looking for a few plain strings takes microseconds)."""

    length: int
    pattern: re.Pattern[str]
    runs: tuple[str, ...]  # case-folded; none: the expression runs on every text

    def may_occur_in(self, folded: str) -> bool:
        """Whether a text, given case-folded, may hold a form."""
        return not self.runs or any(map(folded.__contains__, self.runs))


def forms_of(value: str) -> ValueForms:
    """The forms of `value`: its case variants spelt, the base64 of its whole forms."""
    variants = _case_variants(value)
    cores = _base64_forms(value)
    choices = [_spelling(variant) for variant in variants]
    choices += [_base64_pattern(core) for core in sorted(cores, key=len, reverse=True)]
    runs = [_longest_plain_run(variant) for variant in variants]
    runs += [max(re.split(r"[+/]", core), key=len) for core in cores]
    anchored = min(map(len, runs)) >= _MIN_RUN
    return ValueForms(
        length=len(value),
        pattern=re.compile("|".join(choices), re.IGNORECASE),
        runs=_shortest([run.casefold() for run in runs]) if anchored else (),
    )


def _shortest(runs: list[str]) -> tuple[str, ...]:
    """The runs that hold no other: a text that holds one of the others holds
    one of these."""
    unique = sorted(set(runs), key=len)
    kept: list[str] = []
    for run in unique:
        if not any(shorter in run for shorter in kept):
            kept.append(run)
    return tuple(kept)


def _longest_plain_run(value: str) -> str:
    return max(_PLAIN_RUN.findall(value), key=len, default="")


def _case_variants(value: str) -> list[str]:
    """The value, and its upper- or lower-cased forms that a case-insensitive
    match does not find (`ß` upper-cases to `SS`)."""
    variants = {value.lower(): value}
    for variant in (value.upper(), value.casefold()):
        variants.setdefault(variant.lower(), variant)
    return list(variants.values())


# ----- character by character ------------------------------------------------------
def _spelling(value: str) -> str:
    """`value`, each character in any of its forms. A run of backslashes is one
    atom (any number of them, or as many url-encoded), and the character after
    it is matched without the backslash of its own escape: the run took it."""
    atoms: list[str] = []
    after_backslash = False
    for run in re.findall(r"\\+|[^\\]", value):
        if run[0] == "\\":
            atoms.append(rf"(?:{_BACKSLASHES}|(?:%(?:25)*+5c){{{len(run)}}})")
        else:
            atoms.append(_spelt(run, after_backslash=after_backslash))
        after_backslash = run[0] == "\\"
    return "".join(atoms)


@functools.cache
def _spelt(char: str, *, after_backslash: bool = False) -> str:
    if char in _PLAIN:
        return re.escape(char)
    prefix = "" if after_backslash else _BACKSLASHES
    ways = [re.escape(char)]
    if char == "\n":
        ways.append(r"\r\n")  # a terminal's line end, as the kept stdout has it
    ways += [prefix + tail for tail in _escape_tails(char)]
    ways += _percent_encodings(char)
    ways += _entities(char)
    return "(?:" + "|".join(dict.fromkeys(ways)) + ")"


def _escape_tails(char: str) -> list[str]:
    """What follows the backslash when JSON, repr, Go or YAML escape `char`."""
    code = ord(char)
    tails = [_SHORT_ESCAPES.get(char, re.escape(char))]
    utf16 = char.encode("utf-16-be", _LONE_SURROGATES)
    tails.append(
        "".join(  # JSON's \uXXXX, a surrogate pair beyond the BMP
            ("" if i == 0 else _BACKSLASHES) + f"u{utf16[i]:02x}{utf16[i + 1]:02x}"
            for i in range(0, len(utf16), 2)
        )
    )
    tails.append(f"U{code:08x}")
    if code < 0x100:
        tails.append(f"x{code:02x}")
    utf8 = _utf8(char)
    tails.append(_BACKSLASHES.join(f"x{byte:02x}" for byte in utf8))
    return tails


def _percent_encodings(char: str) -> list[str]:
    encoded = "".join(f"%(?:25)*+{byte:02x}" for byte in _utf8(char))
    if char == "%":  # `%25`, `%2525`: the plain `%` is tried first
        encoded = "%(?:25)++"
    return [encoded, r"\+"] if char == " " else [encoded]


def _entities(char: str) -> list[str]:
    if char == "&":
        return [_AMPERSAND, r"&#0*38;", r"&#x0*26;"]
    names = [f"#0*{ord(char)}", f"#x0*{ord(char):x}"]
    if ord(char) in _ENTITIES:
        names.append(_ENTITIES[ord(char)])
    return [f"{_AMPERSAND}(?:{'|'.join(names)});"]


# ----- base64 ---------------------------------------------------------------------
def _whole_forms(value: str) -> set[str]:
    """The forms of the whole value that base64 may be taken of."""
    ascii_json = json.dumps(value)[1:-1]
    utf8_json = json.dumps(value, ensure_ascii=False)[1:-1]
    return {
        value,
        ascii_json,
        utf8_json,
        json.dumps(ascii_json)[1:-1],
        json.dumps(utf8_json, ensure_ascii=False)[1:-1],
        quote(value, safe="", errors=_LONE_SURROGATES),
        quote(value, errors=_LONE_SURROGATES),
        quote_plus(value, errors=_LONE_SURROGATES),
        repr(value)[1:-1],
        ascii(value)[1:-1],
        repr(_utf8(value))[2:-1],
        html.escape(value),
        html.escape(value, quote=False),
    }


def _base64_forms(value: str) -> set[str]:
    cores: set[str] = set()
    for form in _whole_forms(value):
        data = _utf8(form)
        cores.add(base64.b64encode(data).decode())
        cores.update(core for core in _base64_cores(data) if len(core) >= _MIN_BASE64_CORE)
    return cores


def _base64_cores(data: bytes) -> Iterator[str]:
    """The base64 of `data` wherever it starts in a longer base64 text: at each
    of the three alignments, the characters that depend on `data` alone."""
    for offset, mixed_head in enumerate((0, 2, 3)):
        encoded = base64.b64encode(bytes(offset) + data).decode().rstrip("=")
        mixed_tail = 1 if (offset + len(data)) % 3 else 0
        yield encoded[mixed_head : len(encoded) - mixed_tail]


def _base64_pattern(core: str) -> str:
    """`core` in the standard or the URL-safe alphabet; base64 keeps its case."""
    escaped = re.escape(core).replace(r"\+", "[+-]").replace("/", "[/_]")
    return f"(?-i:{escaped})"


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", _LONE_SURROGATES)
