"""What a run must not let out, and its removal wherever the run's output
leaves it: Failure conditions, Events, log lines, artifacts kept on disk.

Ansible hides a `no_log` task's result, but not every line it prints about
it (ansible-core's own "Task failed: ..." line carries the message), and a
module error may echo its input: a value read from a Secret, put into a
definition. So redaction goes by value: a value learnt once is replaced
wherever it appears, in any text and in any form output gives it (escaped,
quoted, encoded: redaction_forms.py), not only in mappings that look like a
Secret. Values are learnt from:

- Secrets in the run's events: `data` (and its decoded text) and
  `stringData` of any mapping of kind Secret, YAML or JSON strings included
  (a `definition:` given as a string);
- `no_log` tasks: what reached their arguments through templating, sent by
  our callback plugin (callback_plugins/ansible_operator_no_log.py) as an
  event of kind `SENSITIVE_EVENT`;
- the run's own credentials (`Redactor.add`).

The object's own namespace and name are never learnt (`public`): they are on
the object whose status and Events carry the messages, and a no_log task that
names its object with them would otherwise blank out its role's path and every
sentence that says where something was refused.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.runner import redaction_forms

REDACTED = "<redacted>"
SENSITIVE_EVENT = "ansible_operator_sensitive"
# Shorter values ("true", "1", "ok") are words, not secrets: redacting them
# would blank out ordinary text.
MIN_LENGTH = 4
MAX_PARSED_STRING = 1 << 20  # longer strings are not parsed as manifests
# Under these keys a templated mapping holds names, not secrets (a whole
# Secret definition passed to a no_log task keeps `kind: Secret` readable).
IDENTIFYING_KEYS = frozenset(
    {"kind", "apiVersion", "api_version", "name", "namespace", "state", "type"}
)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DATA_BLOCK = re.compile(r"^(\s*)(?:data|stringData):\s*$")
_TEMPLATE = re.compile(r"{{.*?}}|{%.*?%}|{#.*?#}", re.DOTALL)


class Redactor:
    """One run's sensitive values."""

    def __init__(self, public: Iterable[str] = ()) -> None:
        """`public`: values never redacted (the run's object's namespace and name)."""
        self._forms: dict[str, redaction_forms.ValueForms] = {}
        self._longest_first: list[redaction_forms.ValueForms] | None = None
        self._public = frozenset(public)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def add(self, value: object) -> None:
        """A sensitive value, whole and line by line (a YAML error quotes one
        line); redaction finds each in every form output gives it
        (redaction_forms.py)."""
        if not isinstance(value, str) or len(value.strip()) < MIN_LENGTH:
            return
        for part in {value, *(line.strip() for line in value.splitlines())}:
            if part in self._public:
                continue
            if len(part.strip()) >= MIN_LENGTH and part not in self._forms:
                self._forms[part] = redaction_forms.forms_of(part)
                self._longest_first = None

    def learn(self, event: Mapping[str, Any]) -> None:
        """Take the sensitive values an event carries (call before using the event)."""
        if event.get("event") == SENSITIVE_EVENT:
            for value in event.get("values") or []:
                self.add(value)
            return
        for value in secret_values(event.get("event_data")):
            self.add(value)

    # ----- redaction ---------------------------------------------------------
    def text(self, text: str) -> str:
        if not self._forms or not text:
            return text
        if self._longest_first is None:
            # A value that contains another is replaced whole.
            self._longest_first = sorted(self._forms.values(), key=lambda f: -f.length)
        folded = text.casefold()
        for forms in self._longest_first:
            if forms.may_occur_in(folded):
                text = forms.pattern.sub(REDACTED, text)
        return text

    def value(self, value: Any) -> Any:
        """A copy of a result with Secret data and every known value redacted."""
        if isinstance(value, Mapping):
            secret = value.get("kind") == "Secret"
            return {
                key: (
                    _blank(item) if secret and key in ("data", "stringData") else self.value(item)
                )
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def stdout(self, event: Mapping[str, Any]) -> str:
        """An event's output as it may be shown. Of a task whose result Ansible
        hid (no_log), only that hidden result: the lines Ansible prints around
        it may carry what no_log hides."""
        text = str(event.get("stdout") or "")
        data = event.get("event_data") or {}
        result = data.get("res")
        if text and isinstance(result, Mapping) and "censored" in result:
            host = data.get("host") or "?"
            verdict = "FAILED!" if event.get("event") == "runner_on_failed" else "done"
            return f"{host}: {verdict} => {json.dumps(result, default=str)}"
        return self.text(text)


def _blank(item: Any) -> Any:
    if isinstance(item, Mapping):
        return {name: REDACTED for name in item}
    return REDACTED


# ----- learning ------------------------------------------------------------------
def secret_values(value: Any) -> Iterator[str]:
    """The values of every Secret in `value`: mappings of kind Secret, and
    strings that hold YAML or JSON manifests of one."""
    if isinstance(value, Mapping):
        if value.get("kind") == "Secret":
            yield from _data_values(value.get("data"), encoded=True)
            yield from _data_values(value.get("stringData"), encoded=False)
        for item in value.values():
            yield from secret_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from secret_values(item)
    elif isinstance(value, str) and _may_hold_a_secret(value):
        documents = _documents(value)
        if documents is None:  # what a module's parse error would quote
            yield from _values_in_broken_manifest(value)
        for document in documents or []:
            yield from secret_values(document)


def _data_values(data: Any, *, encoded: bool) -> Iterator[str]:
    if not isinstance(data, Mapping):
        return
    for item in data.values():
        if not isinstance(item, str):
            continue
        yield item
        if encoded:
            with contextlib.suppress(binascii.Error, UnicodeDecodeError, ValueError):
                yield base64.b64decode(item, validate=True).decode()


def _may_hold_a_secret(text: str) -> bool:
    return len(text) <= MAX_PARSED_STRING and "Secret" in text and "kind" in text


def _documents(text: str) -> list[Any] | None:
    """The YAML documents in `text`; None if it does not parse."""
    try:
        return list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError:
        return None


def _values_in_broken_manifest(text: str) -> Iterator[str]:
    """The values under `data:` and `stringData:` blocks of a manifest that
    does not parse, line by line."""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        block = _DATA_BLOCK.match(line)
        if block is None:
            continue
        for follower in lines[number + 1 :]:
            if not follower.strip():
                continue
            if len(follower) - len(follower.lstrip()) <= len(block.group(1)):
                break
            _key, colon, value = follower.strip().partition(":")
            value = value.strip().strip("'\"")
            if colon and value:
                yield value
                yield value.partition(": ")[0]  # the value, if `: ` broke the line


def templated_values(raw: Any, rendered: Any) -> list[str]:
    """What reached a task's arguments through templating: the parts of
    `rendered` that come from `{{ ... }}` in `raw`, not the literal text
    around them (that is in the role's source, not a secret)."""
    if isinstance(raw, str) and isinstance(rendered, str):
        if not _TEMPLATE.search(raw):
            return []
        return _rendered_parts(raw, rendered)
    if isinstance(raw, str) and _TEMPLATE.search(raw):
        return list(_leaves(rendered))  # a whole structure from one expression
    if isinstance(raw, Mapping) and isinstance(rendered, Mapping):
        found: list[str] = []
        for key, item in rendered.items():
            if key in raw:
                found += templated_values(raw[key], item)
            else:
                found += list(_leaves(item))
        return found
    if isinstance(raw, list) and isinstance(rendered, list) and len(raw) == len(rendered):
        pairs = zip(raw, rendered, strict=True)
        return [value for pair in pairs for value in templated_values(*pair)]
    if raw is None:
        return list(_leaves(rendered))
    return []


def _rendered_parts(template: str, rendered: str) -> list[str]:
    literals = _TEMPLATE.split(template)
    pattern = "(.*?)".join(re.escape(literal) for literal in literals)
    match = re.fullmatch(pattern, rendered, re.DOTALL)
    if match is None:  # control structures, whitespace control: all of it
        return [rendered]
    return [part for part in match.groups() if part]


def _leaves(value: Any, key: object = None) -> Iterator[str]:
    if key in IDENTIFYING_KEYS:
        return
    if isinstance(value, Mapping):
        for name, item in value.items():
            yield from _leaves(item, name)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, str):
        yield str(value)


# ----- artifacts -----------------------------------------------------------------
def redact_artifacts(directory: Path, redactor: Redactor) -> None:
    """One run's artifact directory, as kept on disk: known values redacted in
    every file, the output of no_log tasks reduced to their hidden result, and
    every file private (ansible-runner leaves some, fact_cache among them, 0644)."""
    if not directory.is_dir():
        return
    censored: list[tuple[str, str]] = []  # (what Ansible printed, what may be kept)
    events = directory / "job_events"
    for path in sorted(events.glob("*.json")) if events.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            event = json.loads(path.read_text(errors="replace"))
            if isinstance(event, dict):
                shown = redactor.stdout(event)
                printed = str(event.get("stdout") or "")
                if printed and shown != redactor.text(printed):
                    censored.append((printed, shown))
                redacted = redactor.value(event)
                redacted["stdout"] = shown
                if redacted != event:
                    _write_private(path, json.dumps(redacted))
    for path in directory.rglob("*"):
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o700)
            continue
        if path.parent != events:
            _redact_file(path, redactor, censored)
        with contextlib.suppress(OSError):
            path.chmod(0o600)
    directory.chmod(0o700)


def _redact_file(path: Path, redactor: Redactor, censored: list[tuple[str, str]]) -> None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    redacted = text
    for printed, shown in censored:
        # The stdout file has the terminal's line ends or plain ones.
        for form in {printed, printed.replace("\r\n", "\n")}:
            redacted = redacted.replace(form, shown)
    redacted = redactor.text(redacted)
    if redacted != text:
        _write_private(path, redacted)


def _write_private(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.redacting")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(text)
    partial.replace(path)
