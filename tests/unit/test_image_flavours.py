"""The base image's flavours as the local image builder (cluster/images.py)
reads them: each pin file's ansible-core, and the Dockerfile's FROM line that
the node's stand-in base must match."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.cluster.images import (
    ANSIBLE_CORE_2_18,
    DEFAULT_FLAVOUR,
    FLAVOURS,
    RECIPES,
    ImageBuilder,
    ImageError,
    check_base,
    pinned_version,
    project_root,
)

ROOT = project_root()


def test_each_flavour_pins_the_ansible_core_its_name_says() -> None:
    assert pinned_version(ROOT / ANSIBLE_CORE_2_18.constraints, "ansible-core").startswith("2.18.")
    default = pinned_version(ROOT / DEFAULT_FLAVOUR.constraints, "ansible-core")
    assert tuple(int(part) for part in default.split(".")[:2]) > (2, 18)


def test_flavours_have_their_own_tags_and_recipe_names() -> None:
    image = "ghcr.io/ansible-operator/ansible-operator:0.1.0"
    assert [flavour.tag(image) for flavour in FLAVOURS] == [
        image,
        f"{image}-ansible-core-2.18",
    ]
    assert {"operator", "operator-ansible-core-2.18"} <= set(RECIPES)


def test_a_pin_file_without_the_package_is_named(tmp_path: Path) -> None:
    pins = tmp_path / "constraints.txt"
    pins.write_text("# ansible-core==2.18.0 in a comment does not count\nansible==11.13.0\n")
    with pytest.raises(ImageError, match=r"constraints\.txt: no 'ansible-core==' line"):
        pinned_version(pins, "ansible-core")


def test_the_dockerfile_starts_from_the_base_the_node_stands_in_for() -> None:
    check_base(ROOT / "Dockerfile")


def test_another_base_in_the_dockerfile_is_refused_at_its_line(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("# a comment\n\nFROM python:3.14-slim-trixie\nRUN true\n")
    with pytest.raises(ImageError, match=r"Dockerfile:3: FROM python:3\.14-slim-trixie, but"):
        check_base(dockerfile)


def test_an_unknown_recipe_name_lists_the_known_ones(tmp_path: Path) -> None:
    builder = ImageBuilder(tmp_path / "images", source=ROOT)
    with pytest.raises(ImageError, match=r"known: operator, operator-ansible-core-2\.18, samples"):
        builder.recipe("operator-ansible-core-2.17")
