"""Numbers and booleans where Kubernetes wants strings, turned into the strings
ansible-core 2.18 sent: the most common break of a role moving to 2.19+.

ansible-core 2.19 keeps a template's type: `"{{ replicas | int + 1 }}"` is the
number 3, where 2.18 rendered the text "3". Put in a ConfigMap's `data`, a
label or an annotation, the API server refuses the whole object (422). Where a
field of a core kind is string-only (labels and annotations of any object and
of its pod template, a selector's `matchLabels`, ConfigMap `data`, Secret
`data` and `stringData`), the proxy sends the string 2.18 rendered (`str()`:
`3`, `1.5`, `True`) and records it for the run, so the operator keeps working
while its author migrates; the object gets a Warning Event naming the task and
the fix (`| string`). `ansible-operator check` names the same fix before the
run. `--coerce-string-fields=false` sends the body as the role wrote it.

Pure functions over a write's body; the proxy's rule is rules/string_fields.py.
The record's type lives here, beside the runner's other proxy records, for the
run's events to read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.runner.proxy_record import Timeline

__all__ = ["Coerced", "Coercions", "coerce_string_fields"]

# (group, kind) -> the fields of its top level that hold only strings.
STRING_MAPS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "ConfigMap"): ("data",),
    ("", "Secret"): ("data", "stringData"),
}
METADATA_MAPS = ("labels", "annotations")


@dataclass(frozen=True)
class Coerced:
    """One value sent as the string 2.18 rendered."""

    kind: str
    namespace: str
    name: str
    field: str  # `data.replicas`, `metadata.labels.tier`
    value: str  # how the role wrote it: `3`, `true`
    type: str  # "number" or "boolean"

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return (
            f"{self.kind} {where} {self.field} was the {self.type} {self.value}, which the API "
            f'server refuses there; ansible-operator sent "{_as_218(self.value, self.type)}" '
            "as ansible-core 2.18 did"
        )


class Coercions(Timeline[Coerced]):
    """What the proxy coerced for a run, each with the time it did."""


def coerce_string_fields(
    document: Mapping[str, Any], group: str, kind: str
) -> tuple[dict[str, Any], list[Coerced]]:
    """`document` (a write's object) with every number and boolean of its
    string-only fields as the string 2.18 rendered; what was changed."""
    changed: list[Coerced] = []
    metadata = document.get("metadata") if isinstance(document.get("metadata"), Mapping) else {}
    namespace = str(metadata.get("namespace") or "")
    name = str(metadata.get("name") or metadata.get("generateName") or "")

    def strings(value: Any, path: str) -> Any:
        if not isinstance(value, Mapping):
            return value
        result = dict(value)
        for key, item in value.items():
            if isinstance(item, bool | int | float):
                text = _json_text(item)
                kind_of = "boolean" if isinstance(item, bool) else "number"
                changed.append(Coerced(kind, namespace, name, f"{path}.{key}", text, kind_of))
                result[key] = _as_218(text, kind_of)
        return result

    out = dict(document)
    if isinstance(metadata, Mapping) and metadata:
        out["metadata"] = _with_maps(metadata, "metadata", strings)
    spec = document.get("spec")
    if isinstance(spec, Mapping):
        new_spec = dict(spec)
        template = spec.get("template")
        if isinstance(template, Mapping) and isinstance(template.get("metadata"), Mapping):
            new_template = dict(template)
            new_template["metadata"] = _with_maps(
                template["metadata"], "spec.template.metadata", strings
            )
            new_spec["template"] = new_template
        selector = spec.get("selector")
        if isinstance(selector, Mapping) and isinstance(selector.get("matchLabels"), Mapping):
            new_spec["selector"] = {
                **selector,
                "matchLabels": strings(selector["matchLabels"], "spec.selector.matchLabels"),
            }
        out["spec"] = new_spec
    for field in STRING_MAPS.get((group, kind), ()):
        if isinstance(document.get(field), Mapping):
            out[field] = strings(document[field], field)
    return (out if changed else dict(document)), changed


def _with_maps(metadata: Mapping[str, Any], path: str, strings: Any) -> dict[str, Any]:
    result = dict(metadata)
    for key in METADATA_MAPS:
        if isinstance(metadata.get(key), Mapping):
            result[key] = strings(metadata[key], f"{path}.{key}")
    return result


def _json_text(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _as_218(text: str, kind_of: str) -> str:
    """What 2.18's text rendering gave: Python's `str()` (`True`, `3`, `1.5`)."""
    if kind_of == "boolean":
        return "True" if text == "true" else "False"
    return text
