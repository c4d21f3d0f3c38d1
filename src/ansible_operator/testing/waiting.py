"""Waiting for objects to reach a state, with failure messages that say why not."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client


def eventually(
    check: Callable[[], Any],
    *,
    timeout: float = 60.0,
    interval: float = 0.2,
    describe: Callable[[], str] | None = None,
    what: str = "condition",
) -> Any:
    """Poll `check` until it returns something truthy; fail with `describe()`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = describe() if describe else f"last value: {value!r}"
            raise AssertionError(f"{what} not reached within {timeout:.0f}s\n{detail}")
        time.sleep(interval)


def get_custom(
    api: client.ApiClient, group: str, version: str, plural: str, namespace: str, name: str
) -> dict[str, Any] | None:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object(
            group, version, namespace, plural, name
        )
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def condition_of(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return entry
    return None


def wait_for_condition(
    api: client.ApiClient,
    group: str,
    version: str,
    plural: str,
    namespace: str,
    name: str,
    kind: str,
    status: str = "True",
    *,
    timeout: float = 90.0,
    predicate: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """Wait until condition `kind` has `status` (and `predicate(obj)` holds).

    On timeout the message shows the object's status, including the Failure
    condition's message, which carries the last run's failed task.
    """
    holder: dict[str, Any] = {}

    def check() -> dict[str, Any] | None:
        obj = get_custom(api, group, version, plural, namespace, name)
        holder["obj"] = obj
        entry = condition_of(obj, kind)
        if obj is None or entry is None or entry.get("status") != status:
            return None
        if predicate is not None and not predicate(obj):
            return None
        return obj

    def describe() -> str:
        obj = holder.get("obj")
        if obj is None:
            return f"{plural}/{name} in {namespace} does not exist"
        failure = condition_of(obj, "Failure")
        lines = [
            f"status of {plural}/{name}:",
            json.dumps(obj.get("status"), indent=2, sort_keys=True),
        ]
        if failure and failure.get("status") == "True":
            lines.append(f"last run failed: {failure.get('message')}")
        return "\n".join(lines)

    return eventually(
        check, timeout=timeout, describe=describe, what=f"{plural}/{name} condition {kind}={status}"
    )
