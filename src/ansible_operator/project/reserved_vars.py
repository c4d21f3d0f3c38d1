"""What cluster data may not carry into Ansible: names that would set Ansible's own
variables or a role's, keys that look like Ansible's tagged values, text that is not
text, and nesting deeper than Ansible can walk.

A spec's top-level keys become extra vars, the highest precedence there is. So a spec
key that names one of Ansible's variables takes it over: ``ansibleBecomeExe`` becomes
``ansible_become_exe``, and whoever may create the object chooses the command Ansible
runs to become another user. Every connection, privilege, shell and interpreter setting
Ansible reads from variables is named ``ansible_*``, and the rest of what Ansible sets
for a play (``hostvars``, ``omit``, ``playbook_dir``, 2.21's ``_task``, ...) would be
silently shadowed or lost: the names come from the installed ansible-core itself
(ansible_names.py), so a new release's are refused without a change here. Our own names
(``ansible_operator_meta``, ``_<group>_<kind>*``) hold what the operator says about the
object. And a name the role or playbook assigns itself (``register``, ``set_fact``,
``vars:``, ``include_vars``; lint/assigned_vars.py finds them) would be forged: extra
vars beat them too. A key that names any of these is refused: the object gets a
Failure that names the key (and, for a role's name, the task that assigns it), and
nothing runs for it. Names are compared without regard to case: no spelling of a
reserved name gets through on a release or a setting that folds case.

Anywhere in the data, a mapping key starting with ``__ansible`` (in any case) is how
Ansible's JSON encodes tagged values (``__ansible_unsafe``, ``__ansible_vault``: a vault
ciphertext it decrypts with the operator's vault secret). Data from the cluster never
carries one. Nor does it carry a lone UTF-16 surrogate (JSON can spell one, UTF-8 cannot
hold it, and Ansible fails on it deep in a run).

Nesting is bounded (MAX_DEPTH): the API server stores far deeper objects than Python's
recursion (ours, Ansible's and the JSON encoder's) survives, and an object that fails
there deep in a run would fail every retry with a traceback instead of a reason.

The data is checked as Ansible receives it (admission.py: after the snake_case
conversion, which can make ``__ANSIBLE_VAULT`` into ``__ansible_vault``), and what
Ansible's loader then reads is compared with what was meant (ansible_view.py): these
refusals name the problem early; the comparison is the guarantee.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 100
TAG_PREFIX = "__ansible"
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

    reason = "RefusedData"  # of the Failure condition and the Event

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


@dataclass(frozen=True)
class ReservedNames:
    """The names a top-level variable from the cluster may not take, for one run's
    target: Ansible's (from the installed release) and the names its role or playbook
    assigns (name -> where: ``roles/x/tasks/main.yml:12 (register)``)."""

    ansible: frozenset[str]
    ansible_version: str = ""
    assigned: Mapping[str, str] = field(default_factory=dict)
    _folded: frozenset[str] = field(init=False, repr=False, compare=False)
    _assigned_folded: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_folded", frozenset(name.casefold() for name in self.ansible))
        object.__setattr__(
            self,
            "_assigned_folded",
            {name.casefold(): where for name, where in self.assigned.items()},
        )

    def why(self, name: str, *, group: str, kind: str) -> str | None:
        """Why a top-level variable from the cluster may not take this name, or None."""
        folded = name.casefold()
        if folded.startswith(_RESERVED_PREFIXES):
            return "Ansible's own variables (connection, privilege, interpreter, facts) start so"
        if folded in self._folded:
            release = f"ansible-core {self.ansible_version}" if self.ansible_version else "Ansible"
            return f"one of the variables {release} sets or reads itself"
        if folded.startswith(object_prefix(group, kind).casefold()) or folded == (
            "ansible_operator_meta"
        ):
            return "the operator's variables about the object are named so"
        where = self._assigned_folded.get(folded)
        if where is not None:
            return (
                f"the role assigns this variable itself at {where}, and a spec key would "
                "override what it assigns (list the name in the watch's specMayOverride "
                "if the override is meant)"
            )
        return None


def top_level_refusals(
    spec: Mapping[str, Any],
    names: Mapping[str, str],
    reserved: ReservedNames,
    *,
    group: str,
    kind: str,
) -> list[Refusal]:
    """Spec keys whose variable (``names``: key -> variable) is reserved."""
    found = []
    for key in spec:
        variable = names.get(key, key) if isinstance(key, str) else None
        if variable is None:
            continue
        why = reserved.why(variable, group=group, kind=kind)
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


def child_path(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if text.isidentifier():
        return f"{path}.{text}" if path else text
    return f"{path}[{text!r}]"


def _walk(value: Any, path: str, limit: int = MAX_DEPTH) -> Iterator[tuple[str, Any, int]]:
    """(path, value, depth) of every value down to `limit`, without recursion: the depth
    is what is being checked, so the walk itself must not be bounded by it."""
    pending: list[tuple[str, Any, int]] = [(path, value, 0)]
    while pending:
        where, item, depth = pending.pop()
        yield where, item, depth
        if depth >= limit:
            continue
        if isinstance(item, Mapping):
            pending.extend((child_path(where, k), v, depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            pending.extend((child_path(where, i), v, depth + 1) for i, v in enumerate(item))


def _not_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON can spell it, UTF-8 cannot hold it
        return True
    return False


_TAG_PROBLEM = (
    f"keys starting with '{TAG_PREFIX}' (in any case) are how Ansible marks encrypted or "
    "unsafe values; data from the cluster may not use them"
)


def data_refusals(value: Any, path: str) -> list[Refusal]:
    """Tagged-value keys (in any case) and text that is not text anywhere in ``value``,
    and nesting past MAX_DEPTH."""
    found: list[Refusal] = []
    too_deep = False
    for where, item, depth in _walk(value, path):
        if isinstance(item, str):
            if _not_text(item):
                found.append(Refusal(where, "the string holds a lone UTF-16 surrogate: not text"))
            continue
        if not isinstance(item, Mapping | list):
            continue
        if depth >= MAX_DEPTH and item and not too_deep:
            too_deep = True
            shown = where if len(where) <= 80 else f"{where[:60]}...({depth} levels)"
            found.append(
                Refusal(shown, f"the data nests more than {MAX_DEPTH} levels deep; flatten it")
            )
        if isinstance(item, Mapping):
            for key in item:
                if not isinstance(key, str):
                    continue
                if key.casefold().startswith(TAG_PREFIX):
                    found.append(Refusal(child_path(where, key), _TAG_PROBLEM))
                elif _not_text(key):
                    found.append(Refusal(where, "a key holds a lone UTF-16 surrogate: not text"))
    found.sort(key=lambda refusal: refusal.path)
    return found


def tag_refusals(value: Any, path: str) -> list[Refusal]:
    """Tagged-value keys (in any case) anywhere in ``value``, once its depth is known
    to be bounded: what a conversion of its keys may have made (`_ AnsibleVault`)."""
    return sorted(
        (
            Refusal(child_path(where, key), _TAG_PROBLEM)
            for where, item, _ in _walk(value, path, limit=2 * MAX_DEPTH)
            if isinstance(item, Mapping)
            for key in item
            if isinstance(key, str) and key.casefold().startswith(TAG_PREFIX)
        ),
        key=lambda refusal: refusal.path,
    )


def without_managed_fields(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` without metadata.managedFields, for the checks: the API server's record of
    the same fields ("f:<name>" keys, a few levels deeper than the data they name), so
    checking the data checks it; counted, it would refuse data 97 levels deep that the
    limit of 100 allows."""
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping) and "managedFields" in metadata:
        return {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    return obj
