"""Helpers of the fault suite: the fault operator's objects, and processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from ansible_operator.runner import proctree
from ansible_operator.testing.kinds import CustomKinds
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.waiting import eventually

OPERATOR = Path(__file__).resolve().parent / "operator"
GROUP, VERSION = "faults.ansible-operator.io", "v1alpha1"
PLURALS = {"Work": "works", "Hang": "hangs", "Chatty": "chatties"}
PLURALS |= {"Secretive": "secretives", "Echo": "echoes", "Burn": "burns"}
KINDS = CustomKinds(GROUP, VERSION, PLURALS)

StartOperator = Callable[..., OperatorProcess]


def create(
    api: client.ApiClient, namespace: str, kind: str, name: str, **spec: Any
) -> dict[str, Any]:
    return KINDS.create(api, namespace, kind, name, **spec)


def get(api: client.ApiClient, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    return KINDS.get(api, namespace, kind, name)


def patch_spec(api: client.ApiClient, namespace: str, kind: str, name: str, **spec: Any) -> None:
    KINDS.patch_spec(api, namespace, kind, name, spec)


def delete(api: client.ApiClient, namespace: str, kind: str, name: str) -> None:
    KINDS.delete(api, namespace, kind, name)


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

    return KINDS.wait_for_condition(
        api, namespace, kind, name, "Successful", timeout=timeout, predicate=current
    )


def failed(
    api: client.ApiClient, namespace: str, kind: str, name: str, *, timeout: float = 90.0
) -> dict[str, Any]:
    obj = KINDS.wait_for_condition(api, namespace, kind, name, "Failure", timeout=timeout)
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
