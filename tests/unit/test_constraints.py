"""The pin sets of the supported ansible-core releases (2.18 to 2.21) cannot drift
apart, and scripts/ansible_env.py picks the Python and pin set the README says.

constraints.txt pins the default (2.21); constraints-ansible-core-2.18.txt the
oldest, for the second image flavour and CI's second environment; 2.19 and 2.20
are constraints.txt with the Ansible pins replaced (scripts/ansible_env.py).
Apart from the Ansible pins, every environment and image must get the same
packages, or a test on one release says nothing about another.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _load_ansible_env():
    spec = importlib.util.spec_from_file_location("ansible_env", ROOT / "scripts/ansible_env.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ansible_env = _load_ansible_env()
DEFAULT_PINS = ansible_env.pins((ROOT / "constraints.txt").read_text())


def pins_of(minor: str) -> dict[str, str]:
    return ansible_env.pins(ansible_env.pin_text(ansible_env.PIN_SETS[minor]))


def differences(pins: dict[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """{package: (constraints.txt's version, this set's)} where they differ."""
    return {
        name: (DEFAULT_PINS.get(name), pins.get(name))
        for name in sorted(DEFAULT_PINS.keys() | pins.keys())
        if DEFAULT_PINS.get(name) != pins.get(name)
    }


def test_constraints_for_2_18_differ_from_constraints_txt_only_in_the_ansible_pins() -> None:
    pins = ansible_env.pins((ROOT / "constraints-ansible-core-2.18.txt").read_text())
    drift = {
        name: versions
        for name, versions in differences(pins).items()
        if name not in ansible_env.ANSIBLE_PINS
    }
    assert not drift, (
        "constraints-ansible-core-2.18.txt differs from constraints.txt beyond the Ansible "
        f"pins ({', '.join(sorted(ansible_env.ANSIBLE_PINS))}): "
        + ", ".join(f"{name} {old} -> {new}" for name, (old, new) in drift.items())
    )
    assert pins["ansible-core"].startswith("2.18.")


@pytest.mark.parametrize("minor", sorted(ansible_env.PIN_SETS))
def test_each_pin_set_pins_its_ansible_core_and_the_matching_ansible_release(minor: str) -> None:
    pins = pins_of(minor)
    assert pins["ansible-core"].startswith(f"{minor}."), pins["ansible-core"]
    # The `ansible` release N bundles collections for ansible-core 2.(N+7):
    # kubernetes.core comes from it, so it must be the one made for this core.
    assert int(pins["ansible"].split(".")[0]) + 7 == int(minor.split(".")[1]), pins["ansible"]
    assert set(differences(pins)) <= ansible_env.ANSIBLE_PINS


def requirement(name: str) -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (found,) = (r for r in map(Requirement, project["dependencies"]) if r.name == name)
    return found


def test_pyproject_ranges_include_every_pinned_ansible_core_and_ansible_runner() -> None:
    core, runner = requirement("ansible-core"), requirement("ansible-runner")
    pinned = {minor: pins_of(minor) for minor in ansible_env.PIN_SETS}
    assert set(pinned) == {"2.18", "2.19", "2.20", "2.21"}
    outside = [
        f"{name} {pins[name]} (pin set {minor})"
        for minor, pins in pinned.items()
        for name, wanted in (("ansible-core", core), ("ansible-runner", runner))
        if pins[name] not in wanted.specifier
    ]
    assert not outside, f"pyproject.toml's {core}, {runner} leave out pinned " + ", ".join(outside)


def test_a_missing_pin_to_replace_names_the_file_and_the_pin() -> None:
    broken = ansible_env.PinSet("2.99", "constraints.txt", {"ansible-kore": "2.99.0"})
    with pytest.raises(SystemExit, match=r"constraints\.txt: no pin for ansible-kore to replace"):
        ansible_env.pin_text(broken)


def python(version: str, where: str = "/usr/bin") -> ansible_env.Interpreter:
    major, minor, micro = (int(part) for part in version.split("."))
    path = Path(where) / f"python{major}.{minor}"
    return ansible_env.Interpreter(path, (major, minor, micro), str(path))


FOUND = [python("3.11.7"), python("3.13.0", "/opt/py313/bin"), python("3.12.1")]


def choose(minor: str, which: str, found: list) -> tuple[str, str, list[str]]:
    said: list[str] = []
    pin_set, interpreter = ansible_env.choose(minor, which, found, said.append)
    return pin_set.minor, ".".join(map(str, interpreter.version)), said


@pytest.mark.parametrize(
    ("minor", "which", "expected"),
    [
        ("default", "newest", ("2.21", "3.13.0")),
        ("2.18", "oldest", ("2.18", "3.11.7")),
        ("2.19", "oldest", ("2.19", "3.11.7")),
        ("2.20", "oldest", ("2.20", "3.12.1")),
        ("2.18", "newest", ("2.18", "3.13.0")),
    ],
)
def test_picks_the_newest_or_oldest_python_the_release_supports(
    minor: str, which: str, expected: tuple[str, str]
) -> None:
    *picked, said = choose(minor, which, FOUND)
    assert tuple(picked) == expected
    assert said == []


def test_of_one_python_minor_the_newest_patch_release_is_picked() -> None:
    assert choose("2.18", "oldest", [python("3.11.2"), python("3.11.7", "/opt")])[1] == "3.11.7"


def test_default_with_only_python_3_11_falls_back_to_2_18_and_says_why() -> None:
    minor, version, said = choose("default", "newest", [python("3.11.7")])
    assert (minor, version) == ("2.18", "3.11.7")
    (message,) = said
    assert "ansible-core 2.21 (constraints.txt) needs Python 3.12+" in message
    assert "using ansible-core 2.18 (constraints-ansible-core-2.18.txt)" in message


def test_a_release_without_a_suitable_python_is_refused_naming_what_was_found() -> None:
    with pytest.raises(SystemExit, match=r"ansible-core 2.20 needs Python 3.12 .*Python 3.11.7"):
        choose("2.20", "newest", [python("3.11.7")])
    with pytest.raises(SystemExit, match=r"ansible-core 2.21 needs Python 3.12 .*found: none"):
        choose("default", "newest", [])
