"""What `kubectl kustomize` makes of the kustomizations config/ and the scaffold
write, without kubectl: `resources` (files, and folders with a kustomization of
their own) and `patches` that are inline JSON patches (RFC 6902: add, remove,
replace, test) with a target. Anything else a kustomization may say is refused,
so that a test never checks something other than what kustomize would render.
tests/processes/test_sharding_overlays.py compares the two where kubectl is."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION = "kustomization.yaml"
_UNDERSTOOD = {"apiVersion", "kind", "resources", "patches"}

Doc = dict[str, Any]


class Unsupported(Exception):
    """A kustomization this renderer cannot render as kustomize would."""


def render(directory: Path) -> list[Doc]:
    """The objects `kubectl kustomize --load-restrictor=LoadRestrictionsNone
    DIRECTORY` prints (in the files' order, not kustomize's)."""
    path = directory / KUSTOMIZATION
    kustomization = yaml.safe_load(path.read_text()) or {}
    unknown = set(kustomization) - _UNDERSTOOD
    if unknown:
        raise Unsupported(f"{path}: {sorted(unknown)}")
    docs: list[Doc] = []
    for entry in kustomization.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            docs += render(target)
        else:
            docs += [doc for doc in yaml.safe_load_all(target.read_text()) if doc]
    for patch in kustomization.get("patches") or []:
        if set(patch) != {"target", "patch"}:
            raise Unsupported(f"{path}: a patch with {sorted(patch)}")
        operations = yaml.safe_load(patch["patch"])
        if not isinstance(operations, list):
            raise Unsupported(f"{path}: a strategic-merge patch")
        matched = [doc for doc in docs if _matches(doc, patch["target"])]
        if not matched:
            raise AssertionError(f"{path}: no object matches the target {patch['target']}")
        for doc in matched:
            for operation in operations:
                _apply(doc, operation)
    return docs


def find(docs: list[Doc], kind: str, name: str | None = None) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]


def _matches(doc: Doc, target: dict[str, str]) -> bool:
    group, _, version = doc["apiVersion"].rpartition("/")
    actual = {
        "group": group,
        "version": version,
        "kind": doc["kind"],
        "name": doc["metadata"]["name"],
        "namespace": doc["metadata"].get("namespace", ""),
    }
    return all(actual[key] == value for key, value in target.items())


def _apply(doc: Doc, operation: dict[str, Any]) -> None:
    *parents, last = [
        part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]
    ]
    holder: Any = doc
    for part in parents:
        holder = holder[int(part)] if isinstance(holder, list) else holder[part]
    op = operation["op"]
    value = copy.deepcopy(operation.get("value"))
    if isinstance(holder, list):
        index = len(holder) if last == "-" else int(last)
        if op == "add":
            holder.insert(index, value)
        elif op == "remove":
            del holder[index]
        elif op == "replace":
            holder[index] = value
        elif op == "test":
            assert holder[index] == value, f"test failed at {operation['path']}"
        else:
            raise Unsupported(f"op {op}")
    elif op in ("add", "replace"):
        if op == "replace":
            assert last in holder, f"replace of a missing {operation['path']}"
        holder[last] = value
    elif op == "remove":
        del holder[last]
    elif op == "test":
        assert holder.get(last) == value, f"test failed at {operation['path']}"
    else:
        raise Unsupported(f"op {op}")
