"""What `ansible-operator check` reads: the roles and playbooks of the watches and of the
webhooks, and the roles those use (meta dependencies, `import_role`, `include_role`,
`roles:`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ansible_operator.conversion.kinds import KindConversion
from ansible_operator.lint import yaml_nodes as y
from ansible_operator.project.watches import Watch
from ansible_operator.project.webhook_entries import Webhook

if TYPE_CHECKING:
    from ansible_operator.lint.rbac import Unknown

__all__ = [
    "Targets",
    "role_files",
    "roles_reached",
    "roles_used_by_playbook",
    "targets_of",
    "yaml_files",
]

_ROLE_ACTIONS = {
    f"{prefix}{name}"
    for prefix in ("", "ansible.builtin.", "ansible.legacy.")
    for name in ("import_role", "include_role")
}
_NESTED = ("block", "rescue", "always", "pre_tasks", "tasks", "post_tasks", "handlers")


@dataclass
class Targets:
    roles: list[Path] = field(default_factory=list)
    playbooks: list[Path] = field(default_factory=list)
    # The role or playbook each webhook runs, with the webhooks that run it; and those a
    # watch runs too (a reconcile's variables come from the object: unknown here).
    of_webhooks: dict[Path, list[Webhook]] = field(default_factory=dict)
    of_watches: set[Path] = field(default_factory=set)
    # The Kubernetes tasks whose kind is known only when they run (lint/rbac.py).
    rbac_unknown: list[Unknown] = field(default_factory=list)


def yaml_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.suffix in {".yml", ".yaml"} and p.is_file())


def role_files(role: Path, folder: str) -> list[Path]:
    """A role's files of one kind: `tasks`, `handlers`, or `defaults`/`vars`
    (`main.yml`, or every file of a `main/` folder)."""
    if folder in ("tasks", "handlers"):
        return yaml_files(role / folder)
    files = [role / folder / f"main{suffix}" for suffix in (".yml", ".yaml", "")]
    found = [f for f in files if f.is_file()]
    return found or yaml_files(role / folder / "main")


def targets_of(
    watches: Iterable[Watch],
    directory: Path,
    env: Mapping[str, str],
    webhooks: Iterable[Webhook] = (),
    conversions: Iterable[KindConversion] = (),
) -> Targets:
    targets = Targets()
    roles: list[Path] = []
    runs: list[tuple[Path | None, Path | None, Webhook | None]] = []
    for watch in watches:
        runs.append((watch.role, watch.playbook, None))
        if watch.finalizer:
            runs.append((watch.finalizer.role, watch.finalizer.playbook, None))
    runs += [(webhook.role, webhook.playbook, webhook) for webhook in webhooks]
    runs += [
        (version.role.role, version.role.playbook, None)
        for conversion in conversions
        for version in conversion.versions
        if version.role is not None
    ]
    for role, playbook, webhook in runs:
        # A playbook wins over a role, as when it runs.
        target = playbook or role
        if target is not None and webhook is None:
            targets.of_watches.add(target)
        elif target is not None and webhook is not None:
            targets.of_webhooks.setdefault(target, []).append(webhook)
        if role is not None:
            roles.append(role)
        if playbook is not None and playbook not in targets.playbooks:
            targets.playbooks.append(playbook)
            roles += _used_roles([playbook], [playbook.parent / "roles"], directory, env)
    targets.roles = roles_reached(roles, directory, env)
    return targets


def roles_reached(roles: Iterable[Path], directory: Path, env: Mapping[str, str]) -> list[Path]:
    """`roles` and every role they use, each once, in the order found."""
    reached: list[Path] = []
    queue = list(dict.fromkeys(roles))
    while queue:
        role = queue.pop(0)
        if role in reached:
            continue
        reached.append(role)
        files = role_files(role, "tasks") + role_files(role, "handlers") + role_files(role, "meta")
        queue += [r for r in _used_roles(files, [role.parent], directory, env) if r not in queue]
    return reached


def roles_used_by_playbook(playbook: Path, directory: Path, env: Mapping[str, str]) -> list[Path]:
    return _used_roles([playbook], [playbook.parent / "roles"], directory, env)


def _used_roles(
    files: list[Path], near: list[Path], directory: Path, env: Mapping[str, str]
) -> list[Path]:
    places = [*near, directory / "roles"]
    places += [
        Path(p).expanduser() for p in env.get("ANSIBLE_ROLES_PATH", "").split(os.pathsep) if p
    ]
    found = []
    for path in files:
        try:
            root = y.compose_file(path)
        except (OSError, ValueError, yaml.YAMLError):  # ValueError: not UTF-8
            continue  # reported when the file is loaded
        for name in _role_names(root):
            role = _resolve(name, places)
            if role is not None:
                found.append(role)
    return found


def _resolve(name: str, places: list[Path]) -> Path | None:
    if "{{" in name:
        return None
    if Path(name).is_absolute():
        return Path(name) if Path(name).is_dir() else None
    for place in places:
        candidate = place / name
        if candidate.is_dir():
            return candidate.resolve()
    return None  # a collection's role, or missing: loading it with Ansible says which


def _role_names(node: yaml.Node | None) -> Iterator[str]:
    """Role names in a tasks file, a playbook or a role's meta (dependencies)."""
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from _role_names(child)
        return
    for key, _, value in y.items(node):
        if key in _ROLE_ACTIONS:
            name = y.get(value, "name") if isinstance(value, yaml.MappingNode) else value
            if isinstance(name, yaml.ScalarNode):
                yield str(name.value)
        elif key in ("roles", "dependencies") and isinstance(value, yaml.SequenceNode):
            for entry in value.value:
                name = entry if isinstance(entry, yaml.ScalarNode) else None
                name = name or y.get(entry, "role") or y.get(entry, "name")
                if isinstance(name, yaml.ScalarNode):
                    yield str(name.value)
        elif key in _NESTED:
            yield from _role_names(value)
