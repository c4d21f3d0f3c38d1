"""What cluster data may not carry into Ansible: names that would set Ansible's own
variables, values Ansible would decode as tagged, and nesting deeper than it can walk.

A spec's top-level keys become extra vars, the highest precedence there is. So a spec
key that names one of Ansible's variables takes it over: ``ansibleBecomeExe`` becomes
``ansible_become_exe``, and whoever may create the object chooses the command Ansible
runs to become another user. Every connection, privilege, shell and interpreter setting
Ansible reads from variables is named ``ansible_*`` (ansible-core's plugins and
kubernetes.core's read no other name), and the rest of what Ansible sets for a play (its
magic variables: ``hostvars``, ``omit``, ``playbook_dir``, ...) would be silently
shadowed or lost. Our own names (``ansible_operator_meta``, ``_<group>_<kind>*``) hold
what the operator says about the object. A key that names any of these is refused: the
object gets a Failure that names the key, and nothing runs for it.

Anywhere in the data, a mapping key starting with ``__ansible`` is how Ansible's JSON
encodes tagged values (``__ansible_unsafe``, ``__ansible_vault``: a vault ciphertext it
decrypts with the operator's vault secret). Data from the cluster never carries one.

Nesting is bounded (MAX_DEPTH): the API server stores far deeper objects than Python's
recursion (ours, Ansible's and the JSON encoder's) survives, and an object that fails
there deep in a run would fail every retry with a traceback instead of a reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 100
TAG_PREFIX = "__ansible"
# Variables Ansible sets for every task whose names do not start with ``ansible_``
# (ansible-core's vars/manager.py; constants.INTERNAL_STATIC_VARS on 2.19+), plus
# ``vars`` and ``environment``, which it fills in for templating a task.
MAGIC_VARIABLES = frozenset(
    {
        "environment",
        "group_names",
        "groups",
        "hostvars",
        "inventory_dir",
        "inventory_file",
        "inventory_hostname",
        "inventory_hostname_short",
        "omit",
        "play_hosts",
        "playbook_dir",
        "role_name",
        "role_names",
        "role_path",
        "role_uuid",
        "vars",
    }
)
_RESERVED_PREFIXES = ("ansible_", "_ansible_", TAG_PREFIX)


@dataclass(frozen=True)
class Refusal:
    """One reason cluster data may not reach Ansible, and where it is."""

    path: str  # spec.ansibleBecomeExe, metadata.annotations[...], object.spec.a
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


class RefusedData(ValueError):
    """Cluster data that may not become Ansible variables (see the module's docstring)."""

    def __init__(self, refusals: list[Refusal]) -> None:
        self.refusals = refusals
        super().__init__(describe(refusals))


def describe(refusals: list[Refusal], *, shown: int = 5) -> str:
    """One message for a Failure condition and Event: the first few, and how many more."""
    text = "; ".join(str(refusal) for refusal in refusals[:shown])
    if len(refusals) > shown:
        text += f"; and {len(refusals) - shown} more"
    return text


def object_prefix(group: str, kind: str) -> str:
    """Our variables about the object start with this: ``_cache_example_com_memcached``."""
    cleaned = group.replace(".", "_").replace("-", "_")
    return f"_{cleaned}_{kind.lower()}"


def reserved_variable(name: str, *, group: str, kind: str) -> str | None:
    """Why a top-level variable may not take this name from cluster data, or None."""
    if name.startswith(_RESERVED_PREFIXES):
        return "Ansible's own variables (connection, privilege, interpreter, facts) start so"
    if name in MAGIC_VARIABLES:
        return "one of the variables Ansible sets for every task"
    if name.startswith(object_prefix(group, kind)):
        return "the operator's variables about the object start so"
    return None


def top_level_refusals(
    spec: Mapping[str, Any], names: Mapping[str, str], *, group: str, kind: str
) -> list[Refusal]:
    """Spec keys whose variable (``names``: key -> variable) is reserved."""
    found = []
    for key in spec:
        variable = names.get(key, key) if isinstance(key, str) else None
        if variable is None:
            continue
        why = reserved_variable(variable, group=group, kind=kind)
        if why is not None:
            shown = f"'{variable}'" if variable == key else f"'{variable}' (from '{key}')"
            found.append(
                Refusal(
                    f"spec.{key}",
                    f"the key would set the variable {shown}, a name reserved: {why}; "
                    "rename the field",
                )
            )
    return found


def _child_path(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if text.isidentifier():
        return f"{path}.{text}" if path else text
    return f"{path}[{text!r}]"


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any, int]]:
    """(path, value, depth) of every mapping and list, without recursion: the depth is
    what is being checked, so the walk itself must not be bounded by it."""
    pending: list[tuple[str, Any, int]] = [(path, value, 0)]
    while pending:
        where, item, depth = pending.pop()
        if isinstance(item, Mapping):
            yield where, item, depth
            if depth < MAX_DEPTH:
                pending.extend((_child_path(where, k), v, depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            yield where, item, depth
            if depth < MAX_DEPTH:
                pending.extend((_child_path(where, i), v, depth + 1) for i, v in enumerate(item))


def data_refusals(value: Any, path: str) -> list[Refusal]:
    """Tagged-value keys anywhere in ``value``, and nesting past MAX_DEPTH."""
    found: list[Refusal] = []
    too_deep = False
    for where, item, depth in _walk(value, path):
        if depth >= MAX_DEPTH and item and not too_deep:
            too_deep = True
            shown = where if len(where) <= 80 else f"{where[:60]}...({depth} levels)"
            found.append(
                Refusal(shown, f"the data nests more than {MAX_DEPTH} levels deep; flatten it")
            )
        if isinstance(item, Mapping):
            for key in item:
                if isinstance(key, str) and key.startswith(TAG_PREFIX):
                    found.append(
                        Refusal(
                            _child_path(where, key),
                            f"keys starting with '{TAG_PREFIX}' are how Ansible marks "
                            "encrypted or unsafe values; data from the cluster may not use them",
                        )
                    )
    found.sort(key=lambda refusal: refusal.path)
    return found
