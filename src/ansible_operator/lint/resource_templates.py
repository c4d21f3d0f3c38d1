"""The kinds a templated Kubernetes definition makes, read without rendering it.

Operator SDK's most common pattern keeps the object in the role's templates:

    kubernetes.core.k8s:
      definition: "{{ lookup('template', 'deployment.yaml.j2') | from_yaml }}"

(or `lookup('file', ...)`, `query(...)`, the `k8s` module's own `template:`
argument, or a block of YAML text with `{{ }}` in its values). The kind and
apiVersion of such an object are nearly always literal lines of the file:
`kind: Deployment` at the start of a line of a YAML document. They are read
here from the text, Jinja statements (`{% if %}`, `{% for %}`) and comments
left out, so every kind any branch may make is found; a `kind:` whose value is
itself templated, or a file named by a variable, stays unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2 import nodes

from ansible_operator.lint.jinja_types import parse_template

__all__ = ["FileRef", "heads_in_text", "referenced_files", "search_path"]

# The lookups that read a file of the role: (plugin, the role folder searched first).
_LOOKUP_FOLDERS = {"template": "templates", "file": "files"}
_DOCUMENT_START = re.compile(r"^---(\s|$)")
_TOP_LEVEL = re.compile(r"^(?P<key>kind|apiVersion|api_version)\s*:\s*(?P<value>.*?)\s*$")
_STATEMENT_LINE = re.compile(r"^\s*(\{%.*%\}|\{#.*#\})\s*$")


@dataclass(frozen=True)
class FileRef:
    """A file a definition reads: `lookup('template', 'x.yaml.j2')` is ("template", ...)."""

    plugin: str  # "template" or "file"
    name: str


def referenced_files(text: str) -> list[FileRef] | None:
    """The files `text` (a templated argument) reads through `lookup`/`query` of
    `template` or `file`: [] when it reads none; None when a file's name is
    itself templated (or the text is no template Jinja can parse)."""
    try:
        template = parse_template(text)
    except jinja2.TemplateSyntaxError:
        return None
    found: list[FileRef] = []
    for call in template.find_all(nodes.Call):
        if not isinstance(call.node, nodes.Name) or call.node.name not in ("lookup", "query", "q"):
            continue
        if not call.args or not isinstance(call.args[0], nodes.Const):
            continue
        plugin = call.args[0].value
        if plugin not in _LOOKUP_FOLDERS:
            continue
        names = call.args[1:]
        if not names or not all(
            isinstance(n, nodes.Const) and isinstance(n.value, str) for n in names
        ):
            return None  # `lookup('template', item)`: known only when it runs
        found += [FileRef(plugin, n.value) for n in names if isinstance(n, nodes.Const)]
    return found


def search_path(plugin: str, home: Path, project: Path) -> list[Path]:
    """Where Ansible looks for a lookup's relative file: the role's (or the
    playbook's) folder for the plugin, the role itself, then the project's."""
    folder = _LOOKUP_FOLDERS.get(plugin, "files")
    return [home / folder, home, project / folder, project]


def heads_in_text(text: str) -> list[dict[str, str | None]]:
    """The `kind` and `apiVersion` of each object the YAML text (perhaps with
    Jinja in it) makes, as written: `{{ }}` kept, for the caller to report. A
    document whose branches make different kinds gives each of them."""
    heads: list[dict[str, str | None]] = []
    for document in _documents(text):
        heads += _pairs(document)
    return heads


def _documents(text: str) -> list[list[str]]:
    documents: list[list[str]] = [[]]
    for line in text.splitlines():
        if _DOCUMENT_START.match(line):
            documents.append([])
        elif not _STATEMENT_LINE.match(line):
            documents[-1].append(line)
    return [document for document in documents if document]


def _pairs(lines: list[str]) -> list[dict[str, str | None]]:
    """Each top-level `kind:` with the `apiVersion:` written before it in the
    document (or, failing that, after it)."""
    pairs: list[dict[str, str | None]] = []
    api_version: str | None = None
    waiting: list[str] = []  # kinds whose apiVersion comes later
    for line in lines:
        found = _TOP_LEVEL.match(line)
        if found is None:
            continue
        value = _unquoted(found["value"])
        if found["key"] == "kind":
            if api_version is None:
                waiting.append(value)
            else:
                pairs.append({"kind": value, "apiVersion": api_version})
        else:
            api_version = value
            pairs += [{"kind": kind, "apiVersion": api_version} for kind in waiting]
            waiting = []
    pairs += [{"kind": kind, "apiVersion": None} for kind in waiting]
    return pairs


def _unquoted(value: str) -> str:
    value = value.split(" #", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
