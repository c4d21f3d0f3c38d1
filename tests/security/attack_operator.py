"""The operator of the runtime-attack tests (runtime_attacks/): its objects,
its processes, and what a test reads of them."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

from ansible_operator.cluster import Cluster
from ansible_operator.runner import proctree
from ansible_operator.testing.kinds import CustomKinds
from ansible_operator.testing.operator import OperatorProcess
from ansible_operator.testing.reading import events_for
from ansible_operator.testing.waiting import eventually

OPERATOR = Path(__file__).resolve().parent / "runtime_attacks"
GROUP, VERSION = "attacks.ansible-operator.io", "v1alpha1"
PLURALS = {
    "Leak": "leaks",
    "Escape": "escapes",
    "TimedEscape": "timedescapes",
    "Thief": "thieves",
    "Chatter": "chatters",
    "Hog": "hogs",
    "HeldEscape": "heldescapes",
}
KINDS = CustomKinds(GROUP, VERSION, PLURALS)
RUNNER_MODES = ("warm", "reference")


def start(
    cluster: Cluster,
    log_path: Path,
    *,
    mode: str,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    watches: Path | None = None,
) -> OperatorProcess:
    return OperatorProcess(
        watches or OPERATOR / "watches.yaml",
        cluster.kubeconfig,
        log_path=log_path,
        args=[f"--runner-mode={mode}", *(args or [])],
        env=env,
    ).start()


def start_logging_everything(
    cluster: Cluster, scratch: Path, *, mode: str
) -> tuple[OperatorProcess, Path]:
    """An operator that logs everything Ansible emits (every event with its
    result, and Ansible's own output), and the directory of its runs."""
    runs = scratch / "runs"
    process = start(
        cluster,
        scratch / "operator.log",
        mode=mode,
        args=["--ansible-log-events=everything", "--ansible-verbosity=4", f"--runner-dir={runs}"],
        env={"ANSIBLE_DEBUG_LOGS": "true"},
    )
    return process, runs


def object_dir(runs: Path, kind: str, namespace: str, name: str) -> Path:
    """Where the runs of an object keep their artifacts."""
    return runs / GROUP / VERSION / kind / namespace / name


def create(api: client.ApiClient, namespace: str, kind: str, name: str, **spec: Any) -> None:
    KINDS.create(api, namespace, kind, name, **spec)


def delete(api: client.ApiClient, namespace: str, kind: str, name: str) -> None:
    KINDS.delete(api, namespace, kind, name)


def condition(
    api: client.ApiClient, namespace: str, kind: str, name: str, type_: str, timeout: float = 120
) -> dict[str, Any]:
    """The object's condition `type_` once it is True."""
    obj = KINDS.wait_for_condition(api, namespace, kind, name, type_, timeout=timeout)
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


def get(api: client.ApiClient, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    return KINDS.get(api, namespace, kind, name)


def warning_messages(api: client.ApiClient, namespace: str, name: str) -> str:
    """The messages of the Warning Events about `name`, once there is one."""
    found = eventually(
        lambda: [e for e in events_for(api, namespace, name) if e.type == "Warning"],
        what=f"a Warning Event about {name}",
    )
    return "\n".join(e.message or "" for e in found)


# ----- processes ----------------------------------------------------------------
def unique_sleep(seconds: int = 1000) -> str:
    """A `sleep` duration of about `seconds` no other process on the machine has: it
    names the process a role runs or leaves behind."""
    return f"{seconds}.{random.randrange(10**8, 10**9)}"


def sleeping(duration: str) -> list[int]:
    """Live processes running `sleep <duration>`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = proctree.stat_fields(int(entry.name))
        if command[:2] == [b"sleep", duration.encode()] and fields and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def wait_gone(duration: str, timeout: float = 20.0) -> None:
    eventually(
        lambda: not sleeping(duration),
        timeout=timeout,
        what=f"the process `sleep {duration}` a run left behind gone",
    )


def files_under(root: Path) -> Iterator[Path]:
    for folder, _dirs, files in os.walk(root):
        for name in files:
            yield Path(folder, name)
