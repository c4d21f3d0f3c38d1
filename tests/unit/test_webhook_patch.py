"""The JSON patch from a request's object to the object a mutating role answered with.

Each patch is applied with a small RFC 6902 applier written here, apart from the code under
test, and must give exactly the role's object; the patches that matter to the API server
(escaped keys, appended and dropped list items, type changes) are also checked as written.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_operator.webhooks.patch import json_patch, pointer_token

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "web"}, "annotations": {"a/b": "1"}},
    "spec": {
        "containers": [
            {"name": "web", "image": "docker.io/library/nginx:1.27"},
            {"name": "log", "image": "busybox"},
        ],
        "restartPolicy": "Always",
    },
}


def _tokens(path: str) -> list[str]:
    assert path == "" or path.startswith("/"), path
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def apply(document: Any, patch: list[dict[str, Any]]) -> Any:
    """RFC 6902 add, remove and replace, as the API server applies them."""
    document = copy.deepcopy(document)
    for operation in patch:
        tokens = _tokens(operation["path"])
        if not tokens:
            assert operation["op"] == "replace"
            document = operation["value"]
            continue
        parent = document
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if operation["op"] == "add":
                assert index <= len(parent)
                parent.insert(index, operation["value"])
            elif operation["op"] == "remove":
                del parent[index]
            else:
                parent[index] = operation["value"]
        elif operation["op"] == "add":
            parent[last] = operation["value"]
        elif operation["op"] == "remove":
            del parent[last]
        else:
            assert last in parent, f"replace of a missing member {operation['path']}"
            parent[last] = operation["value"]
    return document


def changed(**edits: Any) -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    for where, value in edits.items():
        *path, last = where.split("__")
        target: Any = pod
        for token in path:
            target = target[int(token)] if token.isdigit() else target[token]
        if value is None:
            del target[last]
        else:
            target[int(last) if last.isdigit() else last] = value
    return pod


CASES = {
    "nothing": POD,
    "image rewritten": changed(
        spec__containers__0__image="harbor.example.com/proxy/library/nginx:1.27"
    ),
    "label added": changed(metadata__labels={"app": "web", "rewritten": "yes"}),
    "label removed": changed(metadata__labels={}),
    "annotation with a slash": changed(metadata__annotations={"a/b": "2", "c~d/e": "x"}),
    "container appended": changed(
        spec__containers=[*POD["spec"]["containers"], {"name": "side", "image": "envoy"}]
    ),
    "two containers dropped": changed(spec__containers=[]),
    "first of two dropped": changed(spec__containers=[POD["spec"]["containers"][1]]),
    "key removed": changed(spec__restartPolicy=None),
    "scalar to mapping": changed(spec__restartPolicy={"odd": True}),
    "string to number": changed(metadata__name=5),
    "number to boolean": {"a": True, "b": [1]},
    "whole document": ["not", "a", "mapping"],
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_patch_turns_the_request_object_into_the_answer(name: str) -> None:
    old = POD if name != "number to boolean" else {"a": 1, "b": [1.0]}
    new = CASES[name]
    patch = json_patch(old, new)
    assert apply(old, patch) == new
    # Type for type too: 1 and true, 1 and 1.0 are different JSON.
    assert repr(apply(old, patch)) == repr(new)
    assert old == (POD if name != "number to boolean" else {"a": 1, "b": [1.0]})


def test_an_unchanged_object_needs_no_patch() -> None:
    assert json_patch(POD, copy.deepcopy(POD)) == []


def test_only_what_changed_is_touched() -> None:
    new = CASES["image rewritten"]
    assert json_patch(POD, new) == [
        {
            "op": "replace",
            "path": "/spec/containers/0/image",
            "value": "harbor.example.com/proxy/library/nginx:1.27",
        }
    ]


def test_keys_with_slash_and_tilde_are_escaped_as_one_token() -> None:
    patch = json_patch({"m": {"goharbor.io/image-rewrite": "auto"}}, {"m": {"x~y": "1"}})
    assert patch == [
        {"op": "remove", "path": "/m/goharbor.io~1image-rewrite"},
        {"op": "add", "path": "/m/x~0y", "value": "1"},
    ]
    assert pointer_token("~/") == "~0~1"


def test_list_items_dropped_from_the_end_are_removed_last_first() -> None:
    assert json_patch({"l": [1, 2, 3]}, {"l": [1]}) == [
        {"op": "remove", "path": "/l/2"},
        {"op": "remove", "path": "/l/1"},
    ]
    assert json_patch({"l": [1]}, {"l": [1, 2, 3]}) == [
        {"op": "add", "path": "/l/1", "value": 2},
        {"op": "add", "path": "/l/2", "value": 3},
    ]
