"""The one admission step of cluster data into a run: what may not reach Ansible is
refused, and what may is handed over in a form Ansible reads back exactly.

    object (or AdmissionReview) --admit--> RunVariables (author's JSON, cluster's YAML)
                                  \\--> RefusedData (a Failure naming each key; no run)

In order, each on the data as it will reach Ansible:

1. the raw data: nesting past the limit, keys like Ansible's tags (in any case), text
   that is not text (reserved_vars.data_refusals), managedFields aside;
2. the top-level names, after the snake_case conversion: Ansible's own (read from the
   installed release), ours, and the names the role assigns itself; keys that collide
   once converted;
3. the converted variables again for tag-like keys (``_ AnsibleVault`` converts to one);
4. the variables written as the run's file and read back with the installed
   ansible-core's own loader: every string from the cluster untrusted, no tagged
   value, nothing other than written (ansible_view.py). This is the guarantee; the
   steps before it name a problem where it is.

The reconciler runs it before it writes anything to the object (a refused object gets
no finalizer and never shows Running); the webhooks before a run is started. It parses
YAML with Ansible's loader: callers on the event loop run it in a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.project import ansible_view, params, reserved_vars
from ansible_operator.project.ansible_view import ExtraVars
from ansible_operator.project.reserved_vars import Refusal, RefusedData, ReservedNames


class CollidingKeys(RefusedData):
    """Spec keys that become one variable: the spec is invalid for this watch."""

    reason = "InvalidSpec"


@dataclass(frozen=True)
class RunVariables:
    """A run's extra vars, as its two files hold them (extravars_file.py)."""

    author: dict[str, Any]  # templated: the watch's vars (all of them, `markUnsafe: false`)
    cluster: ExtraVars | None  # never templated; None when the watch asks for templating

    def merged(self) -> dict[str, Any]:
        """Every variable, as the run sees them (the author's win, as in the reference)."""
        return {**(self.cluster.variables if self.cluster else {}), **self.author}


@dataclass(frozen=True)
class ObjectRules:
    """How one watch's objects become variables (its watches.yaml entry)."""

    group: str
    kind: str
    snake_case: bool
    mark_unsafe: bool
    reserved: ReservedNames
    # How the cluster's variables are written and read back (tests without Ansible
    # give one that only writes them).
    read_back: Callable[[dict[str, Any]], ExtraVars] = ansible_view.read_exactly


def admit_object(
    obj: Mapping[str, Any],
    rules: ObjectRules,
    *,
    watch_vars: Mapping[str, Any] | None = None,
    finalizer_vars: Mapping[str, Any] | None = None,
) -> RunVariables:
    """The variables of a run for `obj`; RefusedData naming every key that may not be."""
    found: list[Refusal] = []
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        names = (
            {key: params.to_snake(key) for key in spec if isinstance(key, str)}
            if rules.snake_case
            else {}
        )
        found += reserved_vars.top_level_refusals(
            spec, names, rules.reserved, group=rules.group, kind=rules.kind
        )
    named = {refusal.path for refusal in found}  # one refusal a key: the variable's
    found += (
        refusal
        for refusal in reserved_vars.data_refusals(reserved_vars.without_managed_fields(obj), "")
        if refusal.path not in named
    )
    if found:
        raise RefusedData(found)
    if rules.snake_case and isinstance(spec, Mapping):
        collisions = _collisions(spec)
        if collisions:
            raise CollidingKeys(collisions)
    cluster = params.cluster_variables(
        obj, group=rules.group, kind=rules.kind, snake_case=rules.snake_case
    )
    return _hand_over(cluster, params.author_variables(watch_vars, finalizer_vars), rules)


def admit_data(
    cluster: dict[str, Any],
    author: Mapping[str, Any],
    *,
    read_back: Callable[[dict[str, Any]], ExtraVars] = ansible_view.read_exactly,
) -> RunVariables:
    """The variables of a run whose cluster data is `cluster` as it stands (an admission
    request's: its top-level names are ours); RefusedData as `admit_object`."""
    found = reserved_vars.data_refusals(_checked(cluster), "")
    if found:
        raise RefusedData(found)
    rules = ObjectRules(
        "", "", snake_case=False, mark_unsafe=True, reserved=_NONE, read_back=read_back
    )
    return _hand_over(cluster, dict(author), rules)


_NONE = ReservedNames(frozenset())


def _checked(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The data to check: each object in it without its managedFields."""
    return {
        key: (reserved_vars.without_managed_fields(value) if isinstance(value, Mapping) else value)
        for key, value in cluster.items()
    }


def _hand_over(cluster: dict[str, Any], author: dict[str, Any], rules: ObjectRules) -> RunVariables:
    # The snake_case conversion may make a tag-like key of one that was not (`_ Ansible`).
    converted = reserved_vars.tag_refusals(_checked(cluster), "")
    if converted:
        raise RefusedData(converted)
    for name in author:  # the author's win, as in the reference: one file holds each name
        cluster.pop(name, None)
    if not rules.mark_unsafe:
        return RunVariables({**cluster, **author}, None)
    return RunVariables(author, rules.read_back(cluster))


def _collisions(spec: Mapping[str, Any]) -> list[Refusal]:
    return [
        Refusal(
            path,
            f"the keys '{first}' and '{second}' collide after the snake_case conversion; "
            "rename one, or set snakeCaseParameters: false in watches.yaml",
        )
        for path, first, second in params.snake_case_collisions(spec)
    ]
