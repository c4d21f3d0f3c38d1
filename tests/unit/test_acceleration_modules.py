"""One module per warm-runner acceleration under runner/warm/accelerations/,
named as the acceleration, holding its record, its probe and its installers;
the process management (the warm runner, the module interpreter) apart."""

from __future__ import annotations

import importlib
from pathlib import Path

from ansible_operator.runner.warm import accelerations
from ansible_operator.runner.warm.accelerations import ACCELERATIONS

PACKAGE = accelerations.__name__
FILES = sorted(Path(accelerations.__file__).parent.glob("*.py"))
MODULES = [path.stem for path in FILES if path.stem != "__init__"]


def module_of(name: str) -> str:
    return f"{PACKAGE}.{name.replace('-', '_')}"


def test_every_acceleration_is_listed_once() -> None:
    names = [a.name for a in ACCELERATIONS]
    assert len(names) == len(set(names))


def test_each_module_holds_the_record_of_the_acceleration_it_is_named_for() -> None:
    listed = {a.name: a for a in ACCELERATIONS}
    assert sorted(name.replace("-", "_") for name in listed) == MODULES
    for name, record in listed.items():
        module = importlib.import_module(module_of(name))
        assert module.ACCELERATION is record, name


def test_each_probe_and_installer_is_its_accelerations_own() -> None:
    for record in ACCELERATIONS:
        assert record.probe.__module__ == module_of(record.name), record.name
        for step in record.installs:
            assert step.installer.__module__ == module_of(record.name), record.name


def test_no_probe_reads_source_text() -> None:
    # A probe calls what its acceleration relies on and checks the effect: the
    # text of a private function says nothing of what it does in this release.
    import ast

    readers = [
        f"{path.name}:{node.lineno}"
        for path in FILES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute | ast.Name)
        and (node.attr if isinstance(node, ast.Attribute) else node.id)
        in {"getsource", "getsourcelines"}
    ]
    assert not readers, f"probes reading source text: {readers}"
