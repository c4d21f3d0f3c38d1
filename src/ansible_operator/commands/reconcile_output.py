"""What `reconcile --check` prints of a task's diff: what the run would change,
not the API server's bookkeeping, and never a Secret's data.

kubernetes.core's `k8s` diffs the object before and after (a server-side dry
run in check mode): each side holds only what differs, so a dry run shows
`metadata.managedFields` (a new timestamp each write) and `resourceVersion`
beside the real change, and a Secret's `data` in base64 for anyone to decode.
The diff printed instead leaves out that bookkeeping (`NOISE`), shows a
Secret's changed keys with their values replaced (saying which changed), and
says nothing for a task whose only difference was bookkeeping. Pure functions over the event's data.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

import yaml

from ansible_operator.runner.redaction import Redactor

__all__ = ["NOISE", "PreviewOutput", "clean_side", "diff_text"]

# What the API server sets on every write: no part of what the role changed.
NOISE = frozenset(
    {"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink"}
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_VALUE = "<secret value: not shown>"
SECRET_CHANGED = "<secret value: not shown, changed>"
_DIFF_START = ("--- before", "+++ after")
_VERDICTS = ("ok:", "changed:", "skipping:", "fatal:", "failed:")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def clean_side(side: Any, kind: str | None, before: Any = None) -> Any:
    """One side of an object's diff without bookkeeping; a Secret's values hidden,
    those of the after side (given the `before` side) saying whether they changed."""
    if not isinstance(side, Mapping):
        return side
    cleaned = dict(side)
    metadata = cleaned.get("metadata")
    if isinstance(metadata, Mapping):
        kept = {key: value for key, value in metadata.items() if key not in NOISE}
        annotations = kept.get("annotations")
        if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
            rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            if rest:
                kept["annotations"] = rest
            else:
                del kept["annotations"]
        if kept:
            cleaned["metadata"] = kept
        else:
            del cleaned["metadata"]
    if kind == "Secret":
        for key in ("data", "stringData"):
            values = cleaned.get(key)
            if isinstance(values, Mapping):
                old = before.get(key) if isinstance(before, Mapping) else None
                if not isinstance(old, Mapping):
                    old = {} if before is not None else values  # the before side itself
                cleaned[key] = {
                    name: SECRET_VALUE if old.get(name) == value else SECRET_CHANGED
                    for name, value in values.items()
                }
    return cleaned


def diff_text(diff: Mapping[str, Any], kind: str | None) -> str:
    """A unified diff of the cleaned sides ("" when nothing but bookkeeping differs)."""
    before = clean_side(diff.get("before"), kind)
    after = clean_side(diff.get("after"), kind, diff.get("before") or {})
    if before == after or (not before and not after):
        return ""
    lines = difflib.unified_diff(
        _yaml_lines(before), _yaml_lines(after), "before", "after", lineterm=""
    )
    return "\n".join(lines)


def _yaml_lines(side: Any) -> list[str]:
    if side in (None, {}, ""):
        return []
    if isinstance(side, str):
        return side.splitlines()
    return yaml.safe_dump(side, sort_keys=True, default_flow_style=False).splitlines()


class PreviewOutput:
    """Events' output as `reconcile --check` shows it: a task's diff, cleaned,
    in place of the one Ansible printed; any other output as the run would.

    Ansible prints a task's diff in an event of its own (`runner_on_file_diff`)
    before the task's result, which alone says the object's kind: the diff is
    held until the result of its task comes, then shown with it."""

    def __init__(self) -> None:
        self._held: dict[str, list[Mapping[str, Any]]] = {}  # diffs by task uuid

    def __call__(self, event: Mapping[str, Any], redactor: Redactor) -> str:
        data = event.get("event_data") or {}
        task = str(data.get("task_uuid") or "")
        if event.get("event") == "runner_on_file_diff":
            diff = data.get("diff")
            diffs = diff if isinstance(diff, list) else [diff]
            self._held.setdefault(task, []).extend(d for d in diffs if isinstance(d, Mapping))
            return ""
        text = redactor.stdout(event)
        held = self._held.pop(task, [])
        result = data.get("res")
        if not held or not isinstance(result, Mapping) or "censored" in result:
            return text
        kind = _kind_of(result)
        shown = [redactor.text(d) for d in (diff_text(diff, kind) for diff in held) if d]
        return "\n".join([*shown, *_without_diff(text)])


def _kind_of(result: Mapping[str, Any]) -> str | None:
    obj = result.get("result")
    if isinstance(obj, Mapping) and isinstance(obj.get("kind"), str):
        return obj["kind"]
    invocation = result.get("invocation") or {}
    arguments = invocation.get("module_args") if isinstance(invocation, Mapping) else None
    definition = (arguments or {}).get("resource_definition") or (arguments or {}).get("kind")
    if isinstance(definition, Mapping):
        return definition.get("kind")
    return definition if isinstance(definition, str) else None


def _without_diff(text: str) -> list[str]:
    """Ansible's output less the diff it printed (from `--- before` up to the
    task's verdict line: `changed: [localhost]`, `ok: ...`)."""
    kept: list[str] = []
    in_diff = False
    for line in text.splitlines():
        plain = _COLOUR.sub("", line)
        if plain.startswith(_DIFF_START):
            in_diff = True
            continue
        if in_diff and plain.startswith(_VERDICTS):
            in_diff = False
        if not in_diff:
            kept.append(line)
    return kept
