"""A sensitive value is redacted in every form output gives it: escaped once or
twice, url-encoded, repr'd, HTML-escaped, case-changed, base64 of each."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_operator.runner.redaction import REDACTED, Redactor
from ansible_operator.testing.secret_forms import NAMES, forms, fragments

NASTY = {
    "quotes": 'say "hi", it\'s-Qx81',
    "backslashes": "C:\\new\\table\\\\Wk22",
    "ampersand and angles": "salt&pepper<b>Jz47",
    "non-ASCII": "pässwörd€-Lm90",
    "newline": "first-line-Rt33\nsecond-line-Hv56",
    "sharp s and beyond the BMP": "straße-\U0001f600-Pp12",
    "all of them": "Zq7-\"wörd\\&€<'>\nKv9-second",
}


def redactor_of(value: str) -> Redactor:
    redactor = Redactor()
    redactor.add(value)
    return redactor


@pytest.mark.parametrize("form", NAMES)
@pytest.mark.parametrize("value", NASTY.values(), ids=NASTY.keys())
def test_every_form_of_a_value_is_redacted_and_only_it(value: str, form: str) -> None:
    leaked = forms(value)[form]
    redacted = redactor_of(value).text(f"before {leaked} after")
    assert leaked not in redacted
    for fragment in fragments(value):
        assert fragment.lower() not in redacted.lower(), f"{fragment!r} left in {redacted!r}"
    assert REDACTED in redacted
    assert redacted.startswith("before ")
    assert redacted.endswith(" after")


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("value", NASTY.values(), ids=NASTY.keys())
def test_base64_of_a_value_inside_a_longer_base64_text_is_redacted(value: str, offset: int) -> None:
    before, after = b"config-file:"[:offset] + b"\n", b"\nend of file"
    encoded = base64.b64encode(before + value.encode() + after).decode()
    redacted = redactor_of(value).text(encoded)
    assert REDACTED in redacted
    # What is left is the base64 of the text around the value, give or take
    # the two characters at each edge that mix it with the value.
    kept = len(redacted) - len(REDACTED)
    assert kept <= (len(before) + len(after)) * 4 / 3 + 2 * 2 + 2  # + padding


def test_ordinary_output_around_values_is_left_as_it_is() -> None:
    redactor = Redactor()
    for value in NASTY.values():
        redactor.add(value)
    ordinary = (
        'TASK [Label a ConfigMap] ok: {"changed": false, "msg": "a \\"quoted\\" & <b>"}\r\n'
        "path: C:\\\\new\\\\table %25 &amp;amp; caf\\u00e9 pässe Straße \\xc3\\xa4\n"
    )
    assert redactor.text(ordinary) == ordinary


def test_values_shorter_than_four_characters_are_words_not_secrets() -> None:
    redactor = Redactor()
    redactor.add('a"b')
    redactor.add("  ä  ")
    assert not redactor
    assert redactor.text('a"b a\\"b') == 'a"b a\\"b'


def test_a_value_with_a_lone_surrogate_is_redacted_too() -> None:
    # JSON may carry one ("\\ud800"); UTF-8 refuses to encode it.
    value = "half-\ud800-Sg41"
    redacted = redactor_of(value).text(f"{value} {json.dumps(value)}")
    assert redacted == f'{REDACTED} "{REDACTED}"'


@pytest.mark.parametrize(
    "output",
    ["\\" * 200_000, "&amp;" * 40_000, "%25" * 70_000, "\\u0026" * 30_000, "&" * 200_000],
    ids=["backslashes", "entities", "percent", "unicode escapes", "ampersands"],
)
def test_long_runs_of_escapes_cost_one_pass(output: str) -> None:
    # With backtracking from every backslash of a run, this would not end for
    # hours (quadratic in 200,000); one pass takes milliseconds.
    redactor = Redactor()
    for value in NASTY.values():
        redactor.add(value)
    assert redactor.text(output) == output
