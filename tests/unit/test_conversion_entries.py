"""`- conversion:` entries of watches.yaml: read strictly, every mistake at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.conversion.field_map import HUB, Default, Format, Move, Split
from ansible_operator.conversion.kinds import KindConversion
from ansible_operator.project.watches import WatchesError, load_watches_file

ENTRY = """\
- conversion:
    group: example.com
    kind: Widget
    hub: v2
    versions:
      - version: v1
        fieldMap:
          - {hub: spec.size, spoke: spec.replicas}
          - hub: spec.url
            spoke: {scheme: spec.scheme, host: spec.host}
            format: "{scheme}://{host}"
          - {hub: spec.mode, default: fast}
      - version: v3
        role: convert
        vars: {greeting: hello}
"""


def load(tmp_path: Path, text: str) -> list[KindConversion]:
    (tmp_path / "roles" / "convert" / "tasks").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "watches.yaml"
    path.write_text(text)
    return load_watches_file(path, env={}, cwd=tmp_path).conversions


def errors(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(WatchesError) as info:
        load(tmp_path, text)
    return [
        problem.replace(f"{tmp_path / 'watches.yaml'}", "watches.yaml")
        for problem in info.value.problems
    ]


def test_an_entry_is_read_with_its_rules_and_lines(tmp_path: Path) -> None:
    [widget] = load(tmp_path, ENTRY)
    assert (widget.group, widget.kind, widget.hub) == ("example.com", "Widget", "v2")
    v1, v3 = widget.versions
    assert v1.field_map is not None and v1.source.endswith("watches.yaml:6")
    move, split = v1.field_map.rules
    assert move == Move(("spec", "size"), ("spec", "replicas"), move.source)
    assert isinstance(split, Split) and split.format == Format.parse("{scheme}://{host}")
    assert split.spoke == {"scheme": ("spec", "scheme"), "host": ("spec", "host")}
    [default] = v1.field_map.defaults
    assert default == Default(HUB, ("spec", "mode"), "fast", default.source)
    assert v3.role is not None and v3.role.role == (tmp_path / "roles" / "convert").resolve()
    assert v3.role.vars == {"greeting": "hello"}
    assert widget.version_names == ("v2", "v1", "v3")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "- conversion: {group: example.com, kind: W,"
            " versions: [{version: v1, role: convert}]}\n",
            "watches.yaml:1: conversion: 'hub' is required (e.g. hub: v1beta1)",
        ),
        (
            "- conversion: {group: example.com, kind: W, hub: v2}\n",
            "watches.yaml:1: conversion: 'versions' is required",
        ),
        (
            "- conversion: {kind: W, hub: v2, versions: [{version: v1, role: convert}]}\n",
            "watches.yaml:1: conversion: 'group' is required (e.g. group: goharbor.io)",
        ),
        (
            "- conversion: {group: example.com, kind: W, hub: v2, verions: []}\n",
            "watches.yaml:1: conversion: unknown key 'verions' (did you mean 'versions'?)",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - {version: v2, role: convert}\n",
            "watches.yaml:6: version v2 is the hub: the hub needs no conversion of its own",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - {version: V1, role: convert}\n",
            "watches.yaml:6: 'V1' is not a version name as Kubernetes names them",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - {version: v1}\n",
            "watches.yaml:6: version v1: needs a 'fieldMap' (converted in the operator)",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        role: convert\n"
            "        fieldMap: [{hub: spec.a, spoke: spec.b}]\n",
            "watches.yaml:7: version v1: a 'fieldMap' or a 'role', not both",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: metadata.name, spoke: spec.name}\n",
            "watches.yaml:8: fieldMap: hub: 'metadata.name': a conversion may not move metadata",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: 'spec.items[0].a', spoke: spec.a}\n",
            "watches.yaml:8: fieldMap: hub: 'spec.items[0].a': a path goes through mappings only",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: spec.a, spoke: spec.x}\n"
            "          - {hub: spec.a.b, spoke: spec.y}\n",
            "watches.yaml:9: fieldMap: hub spec.a.b and spec.a (at watches.yaml:8) overlap",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: spec.url, spoke: {s: spec.s, h: spec.h}}\n",
            "watches.yaml:8: fieldMap: a split needs a 'format' naming each part, such as '{s}://{h}'",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: spec.url, spoke: {s: spec.s, h: spec.h}, format: '{s}://{host}'}\n",
            "watches.yaml:8: fieldMap: format '{s}://{host}' has placeholders s, host; the parts "
            "are s, h: name each part once",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: spec.a, spoke: spec.b, format: '{a}:{b}'}\n",
            "watches.yaml:8: fieldMap: 'format' is for a split",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: spec.a, spoke: spec.b, default: 1}\n",
            "watches.yaml:8: fieldMap: a default names one side and a value",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        fieldMap:\n"
            "          - {hub: spec.a}\n",
            "watches.yaml:8: fieldMap: a rule is {hub: PATH, spoke: PATH} (a move)",
        ),
        (
            "- conversion:\n    group: example.com\n    kind: W\n    hub: v2\n"
            "    versions:\n      - version: v1\n        role: nowhere\n",
            "watches.yaml:7: 'conversion role': role 'nowhere' not found",
        ),
    ],
)
def test_each_mistake_is_named_at_its_line(tmp_path: Path, text: str, expected: str) -> None:
    found = errors(tmp_path, text)
    assert any(problem.startswith(expected) for problem in found), found


def test_a_kind_converted_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    found = errors(tmp_path, ENTRY + ENTRY)
    assert found == [
        "watches.yaml:16: duplicate conversion of Widget.example.com: already declared at "
        "watches.yaml:1"
    ]


def test_conversions_sit_beside_watches_and_webhooks(tmp_path: Path) -> None:
    text = "- {version: v2, group: example.com, kind: Widget, role: convert}\n" + ENTRY
    [widget] = load(tmp_path, text)
    assert widget.source.endswith("watches.yaml:2")
