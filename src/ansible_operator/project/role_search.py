"""Where a watch's role is looked for (where the reference looks, in its order),
and, when it is in none of those places, an error that says where it looked,
what was meant and, for a collection's role, how to install the collection."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

FQCN = re.compile(r"^[A-Za-z_]\w*\.[A-Za-z_]\w*\.[A-Za-z_]\w*$")
# A directory is taken for a role, for "did you mean", when it has one of these.
ROLE_PARTS = ("tasks", "meta", "handlers", "defaults", "vars")
REQUIREMENTS = "requirements.yml"


@dataclass(frozen=True)
class Candidate:
    path: Path
    # A place the user named (a roles path entry, ./roles): listed in the error
    # even when it does not exist; the other candidates only when their
    # directory exists, so the error lists no `roles/roles/x` that cannot be.
    named: bool = True


def role_candidates(
    role: str, *, roles_paths: Sequence[Path], collections_paths: Sequence[Path], cwd: Path
) -> list[Candidate]:
    """The paths a role may be at, in the order they are tried."""
    if Path(role).is_absolute():
        return [Candidate(Path(role))]
    found: list[Candidate] = []
    if FQCN.match(role):
        namespace, collection, short = role.split(".")
        found += [
            Candidate(place / "roles" / short)
            for place in collection_dirs(namespace, collection, collections_paths)
        ]
    for entry in roles_paths:
        found += [Candidate(entry / role), Candidate(entry / "roles" / role, named=False)]
    return [*found, Candidate(cwd / "roles" / role), Candidate(cwd / role, named=False)]


def collection_dirs(
    namespace: str, collection: str, collections_paths: Sequence[Path]
) -> list[Path]:
    """Where collection `namespace.collection` may be installed: under each
    entry's `ansible_collections`, or in the entry if it is one."""
    places: list[Path] = []
    for entry in collections_paths:
        places.append(entry / "ansible_collections" / namespace / collection)
        if entry.name == "ansible_collections":
            places.append(entry / namespace / collection)
    return places


def role_not_found(
    role: str,
    candidates: Sequence[Candidate],
    *,
    collections_paths: Sequence[Path],
    project_dirs: Sequence[Path],
    cwd: Path,
) -> str:
    """Why `role` is at none of `candidates`: `role 'x' not found ...`.
    `project_dirs`: where a requirements.yml of the project may be."""
    if FQCN.match(role):
        return _collection_role_not_found(role, collections_paths, project_dirs, cwd)
    listed = _listed(candidates)
    name = Path(role).name
    close = _close(name, _roles_in(path.parent for path in listed)) if name else []
    meant = [str(Path(role).with_name(each)) for each in close]  # keeps a path's directories
    return f"role {role!r} not found{_did_you_mean(meant)}; looked in: " + ", ".join(
        _place(path) for path in listed
    )


def _collection_role_not_found(
    role: str, collections_paths: Sequence[Path], project_dirs: Sequence[Path], cwd: Path
) -> str:
    namespace, collection, short = role.split(".")
    fqcn = f"{namespace}.{collection}"
    places = collection_dirs(namespace, collection, collections_paths)
    installed = next((place for place in places if place.is_dir()), None)
    if installed is not None:
        roles = _roles_in([installed / "roles"])
        close = _close(short, roles)
        known = f"; its roles: {', '.join(sorted(roles))}" if roles and not close else ""
        return (
            f"role {role!r} not found: collection {fqcn!r} (at {installed}) has no role "
            f"{short!r}{_did_you_mean(f'{fqcn}.{name}' for name in close)}{known}"
        )
    looked = ", ".join(str(place) for place in places) or "no collections path"
    return (
        f"role {role!r} not found: collection {fqcn!r} is not installed (looked in: {looked}); "
        + _install_advice(fqcn, project_dirs, cwd)
    )


def _install_advice(fqcn: str, project_dirs: Sequence[Path], cwd: Path) -> str:
    requirements = next(
        (
            path
            for path in (d / REQUIREMENTS for d in dict.fromkeys(project_dirs))
            if path.is_file()
        ),
        None,
    )
    if requirements is None:
        return (
            f"install it with 'ansible-galaxy collection install {fqcn}' "
            f"(and list it in a {REQUIREMENTS}, for the image)"
        )
    shown = _relative(requirements, cwd)
    command = f"'ansible-galaxy collection install -r {shown}'"
    if fqcn in requirement_collections(requirements):
        return f"{shown} lists it: install it with {command}"
    return f"{shown} does not list it: add it there, then run {command}"


def requirement_collections(path: Path) -> set[str]:
    """The collection names a requirements.yml lists; none if it cannot be read."""
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return set()
    entries = content.get("collections") if isinstance(content, dict) else None
    names: set[str] = set()
    for entry in entries if isinstance(entries, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else entry
        if isinstance(name, str):
            names.add(name.strip())
    return names


def _listed(candidates: Sequence[Candidate]) -> list[Path]:
    seen: dict[Path, Path] = {}
    for candidate in candidates:
        if candidate.named or candidate.path.parent.is_dir():
            seen.setdefault(candidate.path.resolve(), candidate.path)
    return list(seen.values())


def _place(path: Path) -> str:
    return str(path) if path.parent.is_dir() else f"{path} (no directory {path.parent})"


def _roles_in(directories: Iterable[Path]) -> set[str]:
    roles: set[str] = set()
    for directory in dict.fromkeys(directories):
        if not directory.is_dir():
            continue
        for child in directory.iterdir():
            if child.is_dir() and any((child / part).is_dir() for part in ROLE_PARTS):
                roles.add(child.name)
    return roles


def _close(name: str, choices: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(name, sorted(choices), n=3, cutoff=0.6)


def _did_you_mean(names: Iterable[str]) -> str:
    quoted = [repr(name) for name in names]
    return f" (did you mean {' or '.join(quoted)}?)" if quoted else ""


def _relative(path: Path, cwd: Path) -> Path:
    try:
        return path.relative_to(cwd)
    except ValueError:
        return path
