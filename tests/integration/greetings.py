"""Helpers for tests that drive the test operator's Greeting kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from ansible_operator.testing.waiting import wait_for_condition

OPERATOR = Path(__file__).resolve().parent.parent / "operator"
GROUP, VERSION = "test.ansible-operator.io", "v1alpha1"


def greeting(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Greeting",
        "metadata": {"name": name},
        "spec": spec,
    }


def create(api: client.ApiClient, namespace: str, body: dict[str, Any], plural: str = "greetings"):
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, body
    )


def patch_spec(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "greetings", name, {"spec": spec}
    )


def wait_successful(api: client.ApiClient, namespace: str, name: str, **kwargs: Any):
    return wait_for_condition(
        api, GROUP, VERSION, "greetings", namespace, name, "Successful", **kwargs
    )
