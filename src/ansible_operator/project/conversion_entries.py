"""The conversion entries of ``watches.yaml``: how a kind's versions convert to and from its hub.

    - conversion:
        group: goharbor.io
        kind: HarborCluster
        hub: v1beta1                      # the version every other converts through
        versions:
          - version: v1alpha3             # converted in the operator's process
            fieldMap:
              - {hub: spec.database.replicas, spoke: spec.inClusterDatabase.replicas}
              - hub: spec.externalURL
                spoke: {scheme: spec.expose.scheme, host: spec.expose.host}
                format: "{scheme}://{host}"
              - {hub: spec.database.version, default: "15"}
          - version: v1alpha4             # converted by a role, one run per review
            role: harborcluster_conversion
            vars: {...}
            maxRunnerArtifacts: 20

Read as strictly as a watch: unknown keys, wrong types, paths that are no paths, two rules
writing one place, a format whose placeholders are not the parts named, each a
`watches.yaml:LINE: message`. What needs the CRD (is the hub its storage version, does each
served version have a conversion) is checked where the CRD is known: by `check` against
config/crd, and by the operator against the cluster's.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ansible_operator.conversion import paths
from ansible_operator.conversion.field_map import (
    HUB,
    SPOKE,
    Default,
    FieldMap,
    Format,
    FormatError,
    Move,
    Rule,
    Split,
)
from ansible_operator.conversion.kinds import KindConversion, RoleConversion, VersionConversion
from ansible_operator.project.watch_fields import count, describe
from ansible_operator.project.webhook_entries import EntryReader

ENTRY_KEY = "conversion"
CONVERSION_KEYS = ("group", "kind", "hub", "versions")
VERSION_KEYS = ("version", "fieldMap", "role", "playbook", "vars", "maxRunnerArtifacts")
RULE_KEYS = ("hub", "spoke", "format", "default")
# As Kubernetes names a CRD's versions: a DNS label.
_VERSION = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RULE_HELP = (
    "a rule is {hub: PATH, spoke: PATH} (a move), {hub: PATH, spoke: {PART: PATH, ...}, "
    "format: '{PART}...{PART}'} (a split; or the parts on the hub's side), or "
    "{hub: PATH, default: VALUE} (or spoke:)"
)


def is_conversion_entry(node: yaml.MappingNode) -> bool:
    return any(
        isinstance(key, yaml.ScalarNode) and str(key.value).lower() == ENTRY_KEY
        for key, _ in node.value
    )


def read_entry(reader: EntryReader, entry: yaml.MappingNode) -> KindConversion | None:
    """`- conversion: {...}`: the entry holds nothing else."""
    fields = reader.fields(entry, (ENTRY_KEY,), "conversion entry")
    if ENTRY_KEY not in fields:
        return None
    node = fields[ENTRY_KEY][1]
    if not isinstance(node, yaml.MappingNode):
        reader.error(
            node,
            "'conversion' must be a mapping with group, kind, hub and versions, not "
            f"{describe(reader.construct(node))}",
        )
        return None
    return read_conversion(reader, node, source=reader.where(entry))


def read_conversion(
    reader: EntryReader, node: yaml.MappingNode, *, source: str
) -> KindConversion | None:
    errors_before = len(reader.errors)
    fields = reader.fields(node, CONVERSION_KEYS, "conversion")
    values: dict[str, str] = {"group": ""}
    for key in ("group", "kind", "hub"):
        if key not in fields:
            if key != "group":
                example = "kind: HarborCluster" if key == "kind" else "hub: v1beta1"
                reader.error(node, f"conversion: {key!r} is required (e.g. {example})")
            continue
        value = reader.string(fields[key][1], key, empty_ok=key == "group")
        if value is not None:
            values[key] = value
    if values.get("group") == "":
        if "group" in fields:
            reader.error(
                fields["group"][1],
                "conversion: 'group' must name the custom resource's group (core kinds have "
                "no conversion of ours)",
            )
        else:
            reader.error(node, "conversion: 'group' is required (e.g. group: goharbor.io)")
    hub = values.get("hub")
    if hub is not None and "hub" in fields:
        _version_name(reader, fields["hub"][1], hub)
    versions: list[VersionConversion] = []
    if "versions" not in fields:
        reader.error(
            node,
            "conversion: 'versions' is required: a list of {version, fieldMap} or "
            "{version, role}, one for each version other than the hub",
        )
    else:
        versions = _versions(reader, fields["versions"][1], hub)
    if len(reader.errors) > errors_before or "kind" not in values or hub is None:
        return None
    return KindConversion(
        group=values["group"],
        kind=values["kind"],
        hub=hub,
        versions=tuple(versions),
        source=source,
    )


def _version_name(reader: EntryReader, node: yaml.Node, name: str) -> bool:
    if not _VERSION.match(name) or len(name) > 63:
        reader.error(node, f"{name!r} is not a version name as Kubernetes names them (v1beta1)")
        return False
    return True


def _versions(reader: EntryReader, node: yaml.Node, hub: str | None) -> list[VersionConversion]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        reader.error(
            node,
            "'versions' must be a non-empty list of {version, fieldMap} or {version, role}, "
            f"not {describe(reader.construct(node))}",
        )
        return []
    found: list[VersionConversion] = []
    for item in node.value:
        version = _version(reader, item, hub)
        if version is None:
            continue
        earlier = [each for each in found if each.version == version.version]
        if earlier:
            reader.error(
                item, f"version {version.version} is given twice (first at {earlier[0].source})"
            )
            continue
        found.append(version)
    return found


def _version(reader: EntryReader, node: yaml.Node, hub: str | None) -> VersionConversion | None:
    if not isinstance(node, yaml.MappingNode):
        reader.error(
            node,
            "'versions': each entry must be a mapping with 'version' and a 'fieldMap' or a "
            f"'role', not {describe(reader.construct(node))}",
        )
        return None
    errors_before = len(reader.errors)
    fields = reader.fields(node, VERSION_KEYS, "versions entry")
    name = None
    if "version" not in fields:
        reader.error(node, "'versions' entry: 'version' is required")
    else:
        name = reader.string(fields["version"][1], "version")
        if name is not None and _version_name(reader, fields["version"][1], name) and name == hub:
            reader.error(
                fields["version"][1],
                f"version {name} is the hub: the hub needs no conversion of its own "
                "(list the other versions)",
            )
    ways = [key for key in ("fieldMap", "role", "playbook") if key in fields]
    if not ways:
        reader.error(
            node,
            f"version {name or '?'}: needs a 'fieldMap' (converted in the operator) or a "
            "'role' or 'playbook' (converted by a run)",
        )
    elif "fieldMap" in ways and len(ways) > 1:
        reader.error(
            fields[ways[1]][0],
            f"version {name or '?'}: a 'fieldMap' or a {ways[1]!r}, not both",
        )
    field_map = role = None
    source = reader.where(node)
    if "fieldMap" in fields:
        for key in ("vars", "maxRunnerArtifacts"):
            if key in fields:
                reader.error(fields[key][0], f"{key!r} is for a role's conversion, not a fieldMap")
        field_map = _field_map(reader, fields["fieldMap"][1], source)
    elif ways:
        target_role, target_playbook = reader.target(fields, "conversion ")
        role_vars: dict[str, Any] = {}
        if "vars" in fields:
            role_vars = reader.mapping(fields["vars"][1], "vars") or {}
        artifacts = 20
        if "maxRunnerArtifacts" in fields:
            read = count(minimum=0)(reader, fields["maxRunnerArtifacts"][1], "maxRunnerArtifacts")  # type: ignore[arg-type]
            artifacts = read if read is not None else artifacts
        role = RoleConversion(target_role, target_playbook, role_vars, artifacts)
    if name is None or len(reader.errors) > errors_before:
        return None
    return VersionConversion(version=name, field_map=field_map, role=role, source=source)


def _field_map(reader: EntryReader, node: yaml.Node, source: str) -> FieldMap | None:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        reader.error(node, f"'fieldMap' must be a non-empty list of rules; {RULE_HELP}")
        return None
    rules: list[Rule] = []
    defaults: list[Default] = []
    errors_before = len(reader.errors)
    for item in node.value:
        rule = _rule(reader, item)
        if isinstance(rule, Default):
            defaults.append(rule)
        elif rule is not None:
            rules.append(rule)
    if len(reader.errors) > errors_before:
        return None
    _no_overlaps(reader, node, rules, defaults)
    if len(reader.errors) > errors_before:
        return None
    return FieldMap(tuple(rules), tuple(defaults), source)


def _no_overlaps(
    reader: EntryReader, node: yaml.Node, rules: list[Rule], defaults: list[Default]
) -> None:
    """Two rules may not read or write one place on either side (one a part of the
    other included): which would win is no one's guess. A default may share its place
    with a rule's target (it fills in when the rule finds nothing)."""
    for side in (HUB, SPOKE):
        seen: list[tuple[paths.Path, str]] = []
        for rule in rules:
            for path in rule.paths(side).values():
                for other, where in seen:
                    if paths.overlaps(path, other):
                        reader.error(
                            _line(rule.source),
                            f"fieldMap: {side} {paths.dotted(path)} and {paths.dotted(other)} "
                            f"(at {where}) overlap: each place may be named by one rule",
                        )
                seen.append((path, rule.source))
        placed: dict[paths.Path, str] = {}
        for default in defaults:
            if default.side != side:
                continue
            if default.path in placed:
                reader.error(
                    _line(default.source),
                    f"fieldMap: two defaults for {side} {paths.dotted(default.path)} (first at "
                    f"{placed[default.path]})",
                )
            placed[default.path] = default.source
            for path, where in seen:
                if path != default.path and paths.overlaps(path, default.path):
                    reader.error(
                        _line(default.source),
                        f"fieldMap: the default for {side} {paths.dotted(default.path)} "
                        f"overlaps {paths.dotted(path)} (at {where})",
                    )


def _line(source: str) -> int:
    return int(source.rpartition(":")[2])


def _rule(reader: EntryReader, node: yaml.Node) -> Rule | Default | None:
    if not isinstance(node, yaml.MappingNode):
        reader.error(node, f"'fieldMap': {RULE_HELP}; not {describe(reader.construct(node))}")
        return None
    fields = reader.fields(node, RULE_KEYS, "fieldMap rule")
    source = reader.where(node)
    if "default" in fields:
        sides = [key for key in (HUB, SPOKE) if key in fields]
        if len(sides) != 1 or "format" in fields:
            reader.error(
                node,
                "fieldMap: a default names one side and a value: {hub: PATH, default: VALUE} "
                "or {spoke: PATH, default: VALUE}",
            )
            return None
        side = sides[0]
        path = _path(reader, fields[side][1], side)
        value = reader.construct(fields["default"][1])
        if path is None:
            return None
        return Default(side, path, value, source)  # type: ignore[arg-type]
    if HUB not in fields or SPOKE not in fields:
        reader.error(node, f"fieldMap: {RULE_HELP}")
        return None
    hub = _place(reader, fields[HUB][1], HUB)
    spoke = _place(reader, fields[SPOKE][1], SPOKE)
    if hub is None or spoke is None:
        return None
    if isinstance(hub, dict) and isinstance(spoke, dict):
        reader.error(node, "fieldMap: parts on both sides: one side of a split is one field")
        return None
    if isinstance(hub, tuple) and isinstance(spoke, tuple):
        if "format" in fields:
            reader.error(
                fields["format"][0],
                "fieldMap: 'format' is for a split (one side naming its parts: "
                "spoke: {scheme: PATH, host: PATH})",
            )
            return None
        return Move(hub, spoke, source)
    parts = hub if isinstance(hub, dict) else spoke
    if "format" not in fields:
        reader.error(
            node,
            "fieldMap: a split needs a 'format' naming each part, such as "
            + "'"
            + "://".join("{" + name + "}" for name in list(parts)[:2])  # type: ignore[arg-type]
            + "'",
        )
        return None
    text = reader.string(fields["format"][1], "format")
    if text is None:
        return None
    try:
        form = Format.parse(text)
    except FormatError as error:
        reader.error(fields["format"][1], f"fieldMap: {error}")
        return None
    if set(form.names) != set(parts):  # type: ignore[arg-type]
        reader.error(
            fields["format"][1],
            f"fieldMap: format {text!r} has placeholders {', '.join(form.names)}; the parts "
            f"are {', '.join(parts)}: name each part once",  # type: ignore[arg-type]
        )
        return None
    return Split(hub, spoke, form, source)


def _place(
    reader: EntryReader, node: yaml.Node, side: str
) -> paths.Path | dict[str, paths.Path] | None:
    if isinstance(node, yaml.MappingNode):
        value = reader.mapping(node, side)
        if value is None:
            return None
        if len(value) < 2:
            reader.error(node, f"fieldMap: {side}: a split names two parts or more")
            return None
        found: dict[str, paths.Path] = {}
        for name, text in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                reader.error(node, f"fieldMap: part name {name!r} must be a word (host, port)")
                return None
            try:
                found[name] = paths.parse(text)
            except paths.PathError as error:
                reader.error(node, f"fieldMap: {side}.{name}: {error}")
                return None
        return found
    return _path(reader, node, side)


def _path(reader: EntryReader, node: yaml.Node, side: str) -> paths.Path | None:
    text = reader.string(node, side)
    if text is None:
        return None
    try:
        return paths.parse(text)
    except paths.PathError as error:
        reader.error(node, f"fieldMap: {side}: {error}")
        return None
