"""`ansible-operator bundle --image` (what `make bundle IMG=...` passes) names an
image clusters can pull, pinned: a registry and a version tag or digest."""

from __future__ import annotations

import pytest

from ansible_operator.scaffold.bundle import image_problem


@pytest.mark.parametrize(
    "image",
    [
        "quay.io/example/memcached-operator:v0.1.0",
        "ghcr.io/ansible-operator/samples:0.1.0",
        "registry.example.com:5000/team/op:1.2.3",
        "localhost/op:v1",
        "quay.io/example/op@sha256:" + "a" * 64,
    ],
)
def test_a_pinned_image_of_a_registry_is_taken(image: str) -> None:
    assert image_problem(image) is None


@pytest.mark.parametrize(
    ("image", "missing"),
    [
        ("memcached-operator:latest", "a registry and a version tag or a digest, not `:latest`"),
        ("memcached-operator:v1", "a registry (e.g."),
        ("quay.io/example/memcached-operator", "needs a version tag or a digest"),
        ("quay.io/example/memcached-operator:latest", "needs a version tag or a digest"),
        ("example/memcached-operator:v1", "needs a registry"),
    ],
)
def test_an_unqualified_or_latest_image_is_refused_saying_what_it_lacks(
    image: str, missing: str
) -> None:
    problem = image_problem(image)
    assert problem is not None and problem.startswith(f"--image {image}: ")
    assert missing in problem
    assert "make bundle IMG=..." in problem
