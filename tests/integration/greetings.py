"""Helpers for tests that drive the test operator's Greeting kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from ansible_operator.testing.kinds import CustomKinds

OPERATOR = Path(__file__).resolve().parent.parent / "operator"
GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"
KINDS = CustomKinds(
    GROUP, VERSION, {"Greeting": "greetings", "Broken": "brokens", "Stack": "stacks"}
)


def greeting(name: str, **spec: Any) -> dict[str, Any]:
    return KINDS.body("Greeting", name, **spec)


def create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create a Greeting (or another of the test operator's kinds) as written."""
    return KINDS.create_body(api, namespace, body)


def patch_spec(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    KINDS.patch_spec(api, namespace, "Greeting", name, spec)


def wait_successful(api: client.ApiClient, namespace: str, name: str, **kwargs: Any):
    return KINDS.wait_for_condition(api, namespace, "Greeting", name, "Successful", **kwargs)
