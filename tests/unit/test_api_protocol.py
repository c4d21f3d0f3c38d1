"""One interface to the Kubernetes API (kube/api.py's `Api`), kept by the real client and
the one fake alike: a part written against it works with either, and a test of it with
the fake says something of the real thing."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from ansible_operator.kube.api import Api
from ansible_operator.kube.client import ApiClient
from ansible_operator.testing.fake_api import FakeApi

METHODS = sorted(
    name for name, member in vars(Api).items() if callable(member) and not name.startswith("_")
)


def parameters(function: Callable[..., Any]) -> list[tuple[str, object, object]]:
    """(name, kind, default) of each parameter but `self`."""
    found = inspect.signature(function).parameters.values()
    return [(p.name, p.kind, p.default) for p in found if p.name != "self"]


def test_the_interface_is_what_the_operator_asks_of_the_api() -> None:
    assert METHODS == [
        "create",
        "current_generation",
        "delete",
        "get",
        "list",
        "patch",
        "pause",
        "replace",
        "watch",
    ]


@pytest.mark.parametrize("implementation", [ApiClient, FakeApi])
@pytest.mark.parametrize("method", METHODS)
def test_each_implementation_takes_what_the_interface_says(
    implementation: type, method: str
) -> None:
    declared = parameters(getattr(Api, method))
    found = parameters(getattr(implementation, method))

    # Same names, kinds and defaults (the interface leaves field_manager's default to
    # each implementation).
    assert [(name, kind) for name, kind, _ in found] == [(name, kind) for name, kind, _ in declared]
    for (name, _, default), (_, _, theirs) in zip(declared, found, strict=True):
        if default is not Ellipsis:
            assert theirs == default, f"{implementation.__name__}.{method}({name}=...)"
    is_generator = inspect.isasyncgenfunction(getattr(implementation, method))
    assert is_generator == (method == "watch")
