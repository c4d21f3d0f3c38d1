"""`check`'s look at the project's CRDs (config/crd/bases): what the API server could not
convert, and what is unsafe against the CRDs before (installed, or at a git revision),
each at its file and line (conversion/crd_changes.py says what and why)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.conversion.crd_changes import CrdProblem, changes, kind_of, served_problems
from ansible_operator.conversion.kinds import KindConversion
from ansible_operator.lint import yaml_nodes as y
from ansible_operator.lint.findings import Finding, error, from_problem, warning

CRD_DIR = Path("config/crd/bases")
# The CRD as it was, by name: None when it did not exist then.
Baseline = Callable[["CrdFile"], dict[str, Any] | None]


@dataclass(frozen=True)
class CrdFile:
    path: Path
    node: yaml.Node
    crd: dict[str, Any]

    @property
    def name(self) -> str:
        return str((self.crd.get("metadata") or {}).get("name", ""))


def crd_files(directory: Path) -> tuple[list[CrdFile], list[Finding]]:
    """Every CustomResourceDefinition under config/crd/bases, with its nodes."""
    found: list[CrdFile] = []
    problems: list[Finding] = []
    for path in sorted((directory / CRD_DIR).glob("*.y*ml")):
        try:
            nodes = list(yaml.compose_all(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader))
        except yaml.YAMLError as failure:
            mark = getattr(failure, "problem_mark", None)
            problems.append(error(path, mark.line + 1 if mark else 1, f"invalid YAML: {failure}"))
            continue
        for node in nodes:
            if node is None:
                continue
            crd = yaml.safe_load(yaml.serialize(node))
            if isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition":
                found.append(CrdFile(path, node, crd))
    return found, problems


def line_of(file: CrdFile, problem: CrdProblem) -> int:
    """The line of the field (or the nearest thing that is still there)."""
    node: yaml.Node | None = file.node
    best = y.line_of(file.node)
    versions = y.get(y.get(node, "spec"), "versions")
    if problem.version and isinstance(versions, yaml.SequenceNode):
        for entry in versions.value:
            name = y.get(entry, "name")
            if isinstance(name, yaml.ScalarNode) and name.value == problem.version:
                node, best = entry, y.line_of(entry)
                break
        else:
            return best
        node = y.get(y.get(node, "schema"), "openAPIV3Schema")
        for key in problem.path:
            if node is None:
                break
            if key == "[]":
                node = y.get(node, "items")
            elif key == "{}":
                node = y.get(node, "additionalProperties")
            else:
                properties = y.get(node, "properties")
                key_node = next((k for name, k, _ in y.items(properties) if name == key), None)
                if key_node is None:
                    break
                best = y.line_of(key_node)
                node = y.get(properties, key)
    return best


def crd_findings(
    directory: Path,
    conversions: Sequence[KindConversion],
    baseline: Baseline | None = None,
) -> list[Finding]:
    files, findings = crd_files(directory)
    declared = {(each.group, each.kind): each for each in conversions}
    for file in files:
        conversion = declared.get(kind_of(file.crd))
        for problem in served_problems(file.crd, conversion):
            findings.append(_finding(file, problem))
        if baseline is None:
            continue
        before = baseline(file)
        if before is not None:
            findings.extend(_finding(file, problem) for problem in changes(before, file.crd))
    return findings


def _finding(file: CrdFile, problem: CrdProblem) -> Finding:
    if problem.source:  # the declared conversion's: at its watches.yaml line
        return from_problem(problem.describe(), str(file.path))
    make = error if problem.severity == "error" else warning
    return make(file.path, line_of(file, problem), problem.message)


def git_baseline(directory: Path, revision: str) -> Baseline:
    """The CRDs as the git revision `revision` has them (by file, then name)."""
    top = subprocess.run(
        ["git", "-C", str(directory), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    if top.returncode != 0:
        raise ValueError(f"{directory} is not in a git repository: {top.stderr.strip()}")
    root = Path(top.stdout.strip())
    verified = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if verified.returncode != 0:
        raise ValueError(f"no git revision {revision!r}: {verified.stderr.strip()}")
    cache: dict[Path, dict[str, dict[str, Any]]] = {}

    def at_revision(file: CrdFile) -> dict[str, Any] | None:
        if file.path not in cache:
            relative = file.path.resolve().relative_to(root.resolve())
            shown = subprocess.run(
                ["git", "-C", str(root), "show", f"{revision}:{relative.as_posix()}"],
                capture_output=True,
                text=True,
                check=False,
            )
            documents: Iterable[Any] = (
                yaml.safe_load_all(shown.stdout) if shown.returncode == 0 else ()
            )
            cache[file.path] = {
                str((doc.get("metadata") or {}).get("name")): doc
                for doc in documents
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
            }
        return cache[file.path].get(file.name)

    return at_revision
