"""Reading RBAC rules: whether a (Cluster)Role's rules allow a verb on a resource.
Used by `create api` (the rules a new kind needs) and `check` (the rules a role's
tasks need)."""

from __future__ import annotations

from typing import Any

__all__ = ["granted", "is_cluster_role", "is_role"]


def is_cluster_role(data: Any) -> bool:
    return isinstance(data, dict) and data.get("kind") == "ClusterRole"


def is_role(data: Any) -> bool:
    """A ClusterRole or a Role: what config/rbac/role.yaml may hold."""
    return isinstance(data, dict) and data.get("kind") in ("ClusterRole", "Role")


def granted(rules: list[Any], group: str, resource: str, verb: str) -> bool:
    """Whether `rules` allow `verb` on `resource` of `group` (RBAC rules add up)."""
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
        verbs = rule.get("verbs") or []
        if (
            (group in groups or "*" in groups)
            and (resource in resources or "*" in resources)
            and (verb in verbs or "*" in verbs)
        ):
            return True
    return False
