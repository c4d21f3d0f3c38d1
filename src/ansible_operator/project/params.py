"""The extra vars of a run: the object's spec as Ansible variables, and friends.

The order and names follow Operator SDK's Ansible operator (later entries overwrite
earlier ones):

1. the spec's keys, converted to snake_case (unless ``snakeCaseParameters: false``);
2. ``ansible_operator_meta: {name, namespace}``;
3. ``_<group>_<kind>``: the whole object;
4. ``_<group>_<kind>_spec``: the raw spec, keys as written;
5. the watch's ``vars``, then (finalizer runs) the finalizer's ``vars``.

Everything in 1-4 comes from the cluster, so whoever may create the object wrote it:
admission.py refuses what may not reach Ansible (reserved_vars.py) and, unless the
watch says ``markUnsafe: false``, hands it to Ansible as data it never templates
(extravars_file.py; else ``{{ lookup('pipe', ...) }}`` in a spec would run as the
operator). The watch's own ``vars`` (5) are the operator author's and keep their Jinja.

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


def object_var_name(group: str, kind: str) -> str:
    """The variable holding the whole object: ``_cache_example_com_memcached``."""
    return reserved_vars.object_prefix(group, kind)


def cluster_variables(
    obj: Mapping[str, Any], *, group: str, kind: str, snake_case: bool
) -> dict[str, Any]:
    """Entries 1-4 of the reference's order: what the cluster says, as variables (a
    copy: ``obj`` is left as it is)."""
    raw_spec = obj.get("spec")
    if raw_spec is None:
        raw_spec = {}
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    metadata = obj.get("metadata") or {}

    variables: dict[str, Any] = snake_case_keys(spec) if snake_case else copy.deepcopy(dict(spec))
    variables["ansible_operator_meta"] = {
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
    }
    var = object_var_name(group, kind)
    variables[var] = copy.deepcopy(dict(obj))
    variables[f"{var}_spec"] = copy.deepcopy(raw_spec)
    return variables


def author_variables(
    watch_vars: Mapping[str, Any] | None, finalizer_vars: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Entry 5: the watch's ``vars``, then a finalizer run's, as the author wrote them."""
    variables: dict[str, Any] = {}
    for given in (watch_vars, finalizer_vars):
        if given:
            variables.update(copy.deepcopy(dict(given)))
    return variables


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
