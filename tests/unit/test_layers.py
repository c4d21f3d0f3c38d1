"""The package's import graph has no cycle and every import points down the layer order.

The graph is read with `ast` from the source, so an import inside a function or
under `if TYPE_CHECKING:` counts too: a lazy import still ties two layers together.
docs/architecture.md explains the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ansible_operator

PACKAGE = "ansible_operator"
ROOT = Path(ansible_operator.__file__).parent

# Lowest first. A module may import from its own layer or any layer below it,
# never from above. Keys are top-level parts of the package (a module or a
# subpackage); `""` is the package's own __init__.
LAYERS: list[set[str]] = [
    # Values and small utilities: no knowledge of Kubernetes, Ansible or the runtime.
    {"", "values", "collections"},
    # What the operator tells (logs, metrics), and what its HTTP servers share.
    {"observability"},
    {"serving"},
    {"kube"},
    # The operator's settings: declared in sections, read from flags and the environment.
    {"settings"},
    # An operator project (watches.yaml, roles, a run's extra vars), and its checks.
    {"project", "lint", "conversion"},
    {"runner"},
    {"proxy"},
    {"webhooks"},
    # A generic controller; the Ansible reconciler on it; the manager that runs them.
    {"controller"},
    # Replicas sharing the objects: a ring of Leases and the share it gives each.
    {"sharding"},
    {"reconciler"},
    {"manager"},
    # Where a cluster comes from: only commands choose it.
    {"cluster", "testing"},
    {"commands", "scaffold"},
    {"cli"},
]
LAYER_OF = {part: index for index, layer in enumerate(LAYERS) for part in layer}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    where: str  # file:line


def _module_name(path: Path, root: Path) -> str:
    parts = (PACKAGE, *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        if "ansible_collections" in path.parts:
            continue  # Ansible content shipped as data, loaded by Ansible not Python
        found[_module_name(path, root)] = path
    return found


def _imports(modules: dict[str, Path], root: Path = ROOT) -> list[Import]:
    edges: dict[Import, None] = {}  # ordered, and `from x import a, b` counts once
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = []
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    targets.append(candidate if candidate in modules else base)
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]  # `import a.b.c` names a.b.c's module
                if target and target != name:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    edges[Import(name, target, where)] = None
    return list(edges)


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _upward(edges: list[Import]) -> list[str]:
    return [
        f"{e.where}: {e.importer} (layer {LAYER_OF[_part(e.importer)]}) imports "
        f"{e.imported} (layer {LAYER_OF[_part(e.imported)]})"
        for e in edges
        if _part(e.importer) in LAYER_OF
        and _part(e.imported) in LAYER_OF
        and LAYER_OF[_part(e.importer)] < LAYER_OF[_part(e.imported)]
    ]


def test_every_part_of_the_package_has_a_layer() -> None:
    unplaced = sorted({_part(name) for name in _modules()} - LAYER_OF.keys())
    assert not unplaced, f"add these to LAYERS in {__file__}: {unplaced}"


def test_every_layer_names_only_parts_that_exist() -> None:
    gone = sorted(LAYER_OF.keys() - {_part(name) for name in _modules()})
    assert not gone, f"remove these from LAYERS in {__file__}: {gone}"


def _describe(cycles: list[list[str]], edges: list[Import], node: Callable[[str], str]) -> str:
    """Each cycle, then the imports (file:line) that make it; `node` names
    the module or part an import belongs to in the cycle."""
    lines = []
    for cycle in cycles:
        members = set(cycle)
        lines.append(" <-> ".join(cycle))
        lines += [
            f"  {e.where}: {e.importer} imports {e.imported}"
            for e in edges
            if node(e.importer) in members and node(e.imported) in members
        ]
    return "\n".join(lines)


def test_no_import_cycle_between_modules() -> None:
    edges = _imports(_modules())
    cycles = _cycles(edges)
    assert not cycles, "import cycles:\n" + _describe(cycles, edges, lambda name: name)


def test_no_import_cycle_between_parts() -> None:
    edges = [e for e in _imports(_modules()) if _part(e.importer) != _part(e.imported)]
    collapsed = [Import(_part(e.importer), _part(e.imported), e.where) for e in edges]
    cycles = _cycles(collapsed)
    assert not cycles, "import cycles between parts of the package:\n" + _describe(
        cycles, edges, _part
    )


def test_every_import_points_down_the_layers() -> None:
    upward = _upward(_imports(_modules()))
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_the_checker_finds_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    # The checks above pass on a clean tree; this shows they catch the knot
    # this file was written to untie: kube importing cluster, which imports kube.
    root = tmp_path / PACKAGE
    (root / "kube").mkdir(parents=True)
    (root / "cluster").mkdir()
    for package in (root, root / "kube", root / "cluster"):
        (package / "__init__.py").write_text("")
    (root / "kube" / "kubeconfig.py").write_text(
        "import os\n\nfrom ansible_operator.cluster.pki import write_private\n"
    )
    (root / "cluster" / "pki.py").write_text("from ..kube import kubeconfig\n")

    edges = _imports(_modules(root), root)

    assert _cycles(edges) == [["ansible_operator.cluster.pki", "ansible_operator.kube.kubeconfig"]]
    assert _upward(edges) == [
        "ansible_operator/kube/kubeconfig.py:3: ansible_operator.kube.kubeconfig "
        f"(layer {LAYER_OF['kube']}) imports ansible_operator.cluster.pki "
        f"(layer {LAYER_OF['cluster']})"
    ]


WARM = f"{PACKAGE}.runner.warm"


def _into_warm(edges: list[Import]) -> list[str]:
    """Imports of runner/warm/ by the rest of runner/."""
    return [
        f"{e.where}: {e.importer} imports {e.imported}"
        for e in edges
        if _part(e.importer) == "runner"
        and not (e.importer == WARM or e.importer.startswith(f"{WARM}."))
        and (e.imported == WARM or e.imported.startswith(f"{WARM}."))
    ]


def test_the_reference_runner_imports_nothing_of_the_warm_one() -> None:
    # The warm runner is behind a seam (runner/launcher.py): the host, the
    # process and the rest of runner/ run a reference run without it; only
    # what chooses the launcher (the manager, the commands) names runner/warm.
    found = _into_warm(_imports(_modules()))
    assert not found, "runner/ outside runner/warm/ imports it:\n" + "\n".join(found)


def test_the_seam_check_finds_a_lazy_import_of_warm(tmp_path: Path) -> None:
    root = tmp_path / PACKAGE
    (root / "runner" / "warm").mkdir(parents=True)
    for package in (root, root / "runner", root / "runner" / "warm"):
        (package / "__init__.py").write_text("")
    (root / "runner" / "warm" / "forkserver.py").write_text("")
    (root / "runner" / "process.py").write_text(
        "def start():\n    from ansible_operator.runner.warm import forkserver\n"
    )

    edges = _imports(_modules(root), root)

    assert _into_warm(edges) == [
        "ansible_operator/runner/process.py:2: ansible_operator.runner.process imports "
        "ansible_operator.runner.warm.forkserver"
    ]
