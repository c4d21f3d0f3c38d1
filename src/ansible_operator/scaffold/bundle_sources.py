"""The manifests a bundle is made from: a project's config/ (or a rendered file).

Where they come from, first found wins:

1. `--manifests FILE` (`-`: standard input): already rendered, e.g. by
   `kubectl kustomize config/default`, for kustomizations with patches or prefixes;
2. `config/manifests/kustomization.yaml` (Operator SDK's layout), else
   `config/default/kustomization.yaml` (ours): their `resources`, followed into
   folders and files; a kustomization that transforms (patches, prefixes, labels...)
   is refused, since reading only its resources would give other manifests than
   `kubectl kustomize` does;
3. every YAML file under config/ (this repository's own layout has no kustomization).

`config/samples/` is always read too: the samples become the CSV's alm-examples.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path("config/samples")
KUSTOMIZATIONS = (
    Path("config/manifests/kustomization.yaml"),
    Path("config/default/kustomization.yaml"),
)
KUSTOMIZATION = "kustomization.yaml"
# Keys of a kustomization that only list or describe, never change, what it renders.
_PLAIN_KEYS = {"apiVersion", "kind", "metadata", "resources", "bases", "sortOptions"}


class BundleError(Exception):
    """A bundle that cannot be written or is not valid; the message says where and why."""


@dataclass(frozen=True)
class Manifest:
    """One object of the project, and where it was read (for messages)."""

    doc: dict[str, Any]
    source: str
    sample: bool = False  # read from config/samples: an example, never installed

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind") or "")

    @property
    def name(self) -> str:
        return str((self.doc.get("metadata") or {}).get("name") or "")

    @property
    def api_version(self) -> str:
        return str(self.doc.get("apiVersion") or "")

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def describe(self) -> str:
        return f"{self.source}: {self.kind} {self.name}"


def read_manifests(project: Path, rendered: str | None = None) -> list[Manifest]:
    """The project's objects (see the module's docstring), samples included."""
    if rendered is not None:
        manifests = _rendered(rendered)
        files: list[Path] = []
    else:
        files = _config_files(project)
        manifests = []
    samples = sorted((project / SAMPLES).glob("*.yaml")) if (project / SAMPLES).is_dir() else []
    seen: set[Path] = set()
    for path in [*files, *samples]:
        resolved = path.resolve()
        if resolved in seen or path.name == KUSTOMIZATION:
            continue
        seen.add(resolved)
        sample = (project / SAMPLES).resolve() in resolved.parents
        manifests += _file_documents(path, _relative(path, project), sample=sample)
    return manifests


def _relative(path: Path, project: Path) -> str:
    try:
        return str(path.resolve().relative_to(project.resolve()))
    except ValueError:
        return str(path)


def _rendered(source: str) -> list[Manifest]:
    if source == "-":
        return _documents(sys.stdin.read(), "<stdin>")
    path = Path(source)
    if not path.is_file():
        raise BundleError(f"--manifests {source}: no such file")
    return _file_documents(path, str(path))


def _file_documents(path: Path, label: str, *, sample: bool = False) -> list[Manifest]:
    return _documents(path.read_text(encoding="utf-8"), label, sample=sample)


def _documents(text: str, label: str, *, sample: bool = False) -> list[Manifest]:
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise BundleError(f"{label}: not valid YAML: {error}") from None
    manifests = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
            raise BundleError(
                f"{label}: document {index + 1} is not a Kubernetes object "
                "(a mapping with apiVersion and kind)"
            )
        manifests.append(Manifest(doc, label, sample))
    return manifests


def _config_files(project: Path) -> list[Path]:
    config = project / "config"
    if not config.is_dir():
        raise BundleError(
            f"{config}: no such directory; is {project} a project (run `ansible-operator init`)?"
        )
    for relative in KUSTOMIZATIONS:
        if (project / relative).is_file():
            return _kustomization_files(project / relative, project, [])
    return sorted(
        path
        for path in config.rglob("*.yaml")
        if path.name != KUSTOMIZATION and SAMPLES not in path.relative_to(project).parents
    )


def _kustomization_files(path: Path, project: Path, stack: list[Path]) -> list[Path]:
    label = _relative(path, project)
    if path.resolve() in stack:
        raise BundleError(f"{label}: includes itself (through its resources)")
    try:
        kustomization = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise BundleError(f"{label}: not valid YAML: {error}") from None
    if not isinstance(kustomization, dict):
        raise BundleError(f"{label}: not a kustomization (a YAML mapping)")
    transforms = sorted(set(kustomization) - _PLAIN_KEYS)
    if transforms:
        raise BundleError(
            f"{label}: `{', '.join(transforms)}` would change what it renders, and "
            "`ansible-operator bundle` reads its resources only: render it first, "
            f"`kubectl kustomize {_relative(path.parent, project)} > manifests.yaml`, "
            "then pass `--manifests manifests.yaml`"
        )
    files: list[Path] = []
    for entry in [*(kustomization.get("resources") or []), *(kustomization.get("bases") or [])]:
        target = path.parent / str(entry)
        if target.is_dir() and (target / KUSTOMIZATION).is_file():
            files += _kustomization_files(target / KUSTOMIZATION, project, [*stack, path.resolve()])
        elif target.is_file():
            files.append(target)
        else:
            raise BundleError(
                f"{label}: resource {entry!r} is neither a file nor a folder with a "
                f"{KUSTOMIZATION} (remote resources are not fetched)"
            )
    return files
