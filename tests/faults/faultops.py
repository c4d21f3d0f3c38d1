"""Helpers of the fault suite: the fault operator's objects, and processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from ansible_operator.runner import proctree
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually, get_custom, wait_for_condition

OPERATOR = Path(__file__).resolve().parent / "operator"
GROUP, VERSION = "faults.ansible-operator.io", "v1alpha1"
PLURALS = {"Work": "works", "Hang": "hangs", "Chatty": "chatties"}
PLURALS |= {"Secretive": "secretives", "Echo": "echoes"}

StartOperator = Callable[..., OperatorProcess]


def create(
    api: client.ApiClient, namespace: str, kind: str, name: str, **spec: Any
) -> dict[str, Any]:
    annotations = spec.pop("annotations", None)
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURALS[kind],
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": metadata, "spec": spec},
    )


def get(api: client.ApiClient, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    return get_custom(api, GROUP, VERSION, PLURALS[kind], namespace, name)


def patch_spec(api: client.ApiClient, namespace: str, kind: str, name: str, **spec: Any) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURALS[kind], name, {"spec": spec}
    )


def delete(api: client.ApiClient, namespace: str, kind: str, name: str) -> None:
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURALS[kind], name
    )


def converged(
    api: client.ApiClient,
    namespace: str,
    kind: str,
    name: str,
    *,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """Successful, for the object's current generation, and not Running."""

    def current(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        running = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Running"), {}
        )
        return (
            status.get("observedGeneration") == obj["metadata"]["generation"]
            and running.get("status") != "True"
        )

    return wait_for_condition(
        api,
        GROUP,
        VERSION,
        PLURALS[kind],
        namespace,
        name,
        "Successful",
        timeout=timeout,
        predicate=current,
    )


def failed(
    api: client.ApiClient, namespace: str, kind: str, name: str, *, timeout: float = 90.0
) -> dict[str, Any]:
    obj = wait_for_condition(
        api, GROUP, VERSION, PLURALS[kind], namespace, name, "Failure", timeout=timeout
    )
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Failure")


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (zombies and reused pids aside)."""
    running = []
    for pid in pids:
        fields = proctree.stat_fields(pid)
        if fields is not None and fields[0] != "Z":
            running.append(pid)
    return running


def all_gone(pids: list[int], timeout: float = 15.0) -> None:
    """Every process of a killed operator's tree (runs, modules, commands) ends."""
    eventually(
        lambda: not alive(pids),
        timeout=timeout,
        what="every process of the killed operator gone",
        describe=lambda: "\n".join(
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            for pid in alive(pids)
        ),
    )
