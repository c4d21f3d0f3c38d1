"""The extra vars of a run: the object's spec as Ansible variables, and friends.

The order and names follow Operator SDK's Ansible operator (later entries overwrite
earlier ones):

1. the spec's keys, converted to snake_case (unless ``snakeCaseParameters: false``);
2. ``ansible_operator_meta: {name, namespace}``;
3. ``_<group>_<kind>``: the whole object;
4. ``_<group>_<kind>_spec``: the raw spec, keys as written;
5. the watch's ``vars``, then (finalizer runs) the finalizer's ``vars``.

Everything in 1-4 comes from the cluster, so whoever may create the object
wrote it. Its keys may not name Ansible's own variables nor carry Ansible's tagged
values (reserved_vars.py): such an object is refused before anything runs. And
unless the watch says ``markUnsafe: false``, every string in it is marked unsafe,
data Ansible never templates (else ``{{ lookup('pipe', ...) }}`` in a spec would
run as the operator). The watch's own ``vars`` are the
operator author's and keep their Jinja.

The snake_case conversion gives the same names as the reference for its tested cases
(``sizeK8sBuckets`` → ``size_k8s_buckets``, a leading capital gives a leading ``_``,
HTTP, URL and IP kept as whole words, plurals included), and does not crash on an
empty key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ansible_operator.project import reserved_vars

# Words kept whole, longest first so that a longer one wins at the same position.
_WORDS = ("HTTP", "URL", "IP")
_SEPARATORS = frozenset(" _")


def _word_at(text: str, index: int) -> str | None:
    """The special word (with a plural ``s``) starting at ``index``, if any."""
    if index > 0 and text[index - 1].isupper():
        # Inside a run of capitals ("ZIP"): not a word start.
        return None
    for word in _WORDS:
        if text.startswith(word, index):
            end = index + len(word)
            if end < len(text) and text[end] == "s":
                return word + "s"
            return word
    return None


def to_snake(name: str) -> str:
    """Convert a camelCase (or PascalCase, or spaced) key to snake_case."""
    text = name.strip(" ")
    if not text:
        return ""
    prefix = ""
    if text[0].isupper():
        first = _word_at(text, 0)
        # The reference lower-cases a leading special word (singular) before it adds
        # the "_" for a leading capital; a plural one ("IPs...") keeps the "_".
        if first is None or first.endswith("s"):
            prefix = "_"

    out: list[str] = []

    def boundary() -> None:
        if out and out[-1] != "_":
            out.append("_")

    pending = False  # a word just ended: the next letter starts a new one
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char in _SEPARATORS:
            out.append("_")
            pending = False
            index += 1
            continue
        word = _word_at(text, index)
        if word is not None:
            boundary()
            out.append(word.lower())
            pending = True
            index += len(word)
            continue
        if pending:
            boundary()
            pending = False
        if char.isupper():
            previous = text[index - 1] if index > 0 else ""
            following = text[index + 1] if index + 1 < length else ""
            if (
                previous.islower()
                or previous.isdigit()
                or (previous.isupper() and following.islower())
            ):
                boundary()
            out.append(char.lower())
        else:
            out.append(char)
        index += 1
    return prefix + "".join(out)


def snake_case_keys(value: Any) -> Any:
    """A copy of ``value`` with every mapping key (recursively) converted to snake_case."""
    if isinstance(value, Mapping):
        return {
            (to_snake(key) if isinstance(key, str) else key): snake_case_keys(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [snake_case_keys(item) for item in value]
    return value


def mark_unsafe(value: Any) -> Any:
    """A copy of ``value`` with every string value (not key) wrapped as Ansible unsafe."""
    if isinstance(value, str):
        return {"__ansible_unsafe": value}
    if isinstance(value, Mapping):
        return {key: mark_unsafe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mark_unsafe(item) for item in value]
    return value


def object_var_name(group: str, kind: str) -> str:
    """The variable holding the whole object: ``_cache_example_com_memcached``."""
    return reserved_vars.object_prefix(group, kind)


def refusals(
    obj: Mapping[str, Any], *, group: str, kind: str, snake_case: bool
) -> list[reserved_vars.Refusal]:
    """Why ``obj`` may not become a run's extra vars (reserved_vars.py); empty if it may."""
    spec = obj.get("spec")
    found: list[reserved_vars.Refusal] = []
    if isinstance(spec, Mapping):
        names = {key: to_snake(key) for key in spec if isinstance(key, str)} if snake_case else {}
        found += reserved_vars.top_level_refusals(spec, names, group=group, kind=kind)
    named = {refusal.path for refusal in found}
    # managedFields is the API server's record of the same fields ("f:<name>" keys, as deep
    # as the data): what it would refuse, the data itself already does.
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping) and "managedFields" in metadata:
        obj = {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    found += (
        refusal for refusal in reserved_vars.data_refusals(obj, "") if refusal.path not in named
    )
    return found


def build_extravars(
    obj: Mapping[str, Any],
    *,
    group: str,
    kind: str,
    snake_case: bool,
    unsafe: bool,
    watch_vars: Mapping[str, Any] | None,
    finalizer_vars: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The extra vars of a run for ``obj``, in the reference's order; RefusedData if its
    keys are not for Ansible (the reconciler says why before it asks)."""
    refused = refusals(obj, group=group, kind=kind, snake_case=snake_case)
    if refused:
        raise reserved_vars.RefusedData(refused)
    raw_spec = obj.get("spec")
    if raw_spec is None:
        raw_spec = {}
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    metadata = obj.get("metadata") or {}

    from_cluster: dict[str, Any] = {}
    from_cluster.update(snake_case_keys(spec) if snake_case else copy.deepcopy(dict(spec)))
    from_cluster["ansible_operator_meta"] = {
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
    }
    var = object_var_name(group, kind)
    from_cluster[var] = copy.deepcopy(dict(obj))
    from_cluster[f"{var}_spec"] = copy.deepcopy(raw_spec)
    extravars: dict[str, Any] = mark_unsafe(from_cluster) if unsafe else from_cluster
    if watch_vars:
        extravars.update(copy.deepcopy(dict(watch_vars)))
    if finalizer_vars:
        extravars.update(copy.deepcopy(dict(finalizer_vars)))
    return extravars


def snake_case_collisions(
    spec: Mapping[str, Any], path: str = "spec"
) -> list[tuple[str, str, str]]:
    """Sibling keys that convert to the same snake_case name: ``(path, first, second)``."""
    found: list[tuple[str, str, str]] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, Mapping):
            seen: dict[str, str] = {}
            for key, item in value.items():
                if isinstance(key, str):
                    converted = to_snake(key)
                    if converted in seen:
                        found.append((where, seen[converted], key))
                    else:
                        seen[converted] = key
                walk(item, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{where}[{index}]")

    walk(spec, path)
    return found
