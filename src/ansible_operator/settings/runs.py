"""How many reconcile runs, how long, how big, at what priority, and where they keep files."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from ansible_operator.settings.declare import setting
from ansible_operator.settings.parsers import flattened, go_duration, size, zero_is_none

DEFAULT_RECONCILE_PERIOD = 10 * 3600.0
# Seconds. Neither the reference nor controller-runtime nor kopf has a floor,
# so an existing operator's short periods (a few seconds, to poll something
# outside the cluster) must keep working; one second is far below any of
# those, and above it an object costs at most about one run per second
# instead of a worker's whole time.
MIN_RECONCILE_PERIOD = 1.0
# A hung run holds a worker and an object forever without these.
DEFAULT_RUN_TIMEOUT = 3600.0
DEFAULT_MAX_RUN_OUTPUT = 32 * 2**20  # bytes of Ansible output per run
DEFAULT_RUN_MEMORY_LIMIT = 2**30  # bytes per run, where the operator may make cgroups
# The runner directory's caps (runner/disk_budget.py). A Pod without an
# ephemeral-storage limit shares the node's disk, and the kubelet evicts Pods
# when it has less than 10% of its space or 5% of its inodes free: 1Gi and
# 50,000 inodes stay far from both on the smallest usual node disks (20 GB:
# about 1.3 million inodes), while holding about a thousand runs' artifacts.
DEFAULT_RUNNER_DIR_MAX_SIZE = 2**30
DEFAULT_RUNNER_DIR_MAX_FILES = 50_000


def file_count(text: str) -> int:
    """A number of files: 0 or more."""
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a number of files (0: no cap), got {text!r}")
    return count


def acceleration_list(text: str) -> list[str]:
    """`NAME[,NAME]`; `run` checks the names against the accelerations it knows."""
    return [name.strip() for name in text.split(",") if name.strip()]


@dataclass(frozen=True)
class RunSettings:
    reconcile_period: float = field(
        default=DEFAULT_RECONCILE_PERIOD,
        metadata=setting(
            "--reconcile-period",
            parse=go_duration,
            metavar="DURATION",
            help="default requeue period after success (10h)",
        ),
    )
    max_concurrent_reconciles: int = field(
        default_factory=lambda: os.cpu_count() or 1,
        metadata=setting(
            "--max-concurrent-reconciles",
            parse=int,
            metavar="N",
            help="workers per watch (default: number of CPUs)",
            then=lambda workers: max(1, workers),
        ),
    )
    max_concurrent_runs: int | None = field(  # None: the sum of the watches' workers
        default=None,
        metadata=setting(
            "--max-concurrent-runs",
            parse=int,
            metavar="N",
            help="global cap on Ansible runs across all watches "
            "(default: the sum of the watches' workers)",
        ),
    )
    run_timeout: float | None = field(
        default=DEFAULT_RUN_TIMEOUT,
        metadata=setting(
            "--run-timeout",
            parse=go_duration,
            metavar="DURATION",
            help="kill a run that takes longer (default: 1h; 0: never; per watch: runTimeout)",
            then=zero_is_none,
        ),
    )
    max_run_output: int | None = field(
        default=DEFAULT_MAX_RUN_OUTPUT,
        metadata=setting(
            "--max-run-output",
            parse=size,
            metavar="SIZE",
            help="stop a run that prints more Ansible output (default: 32Mi; 0: no cap)",
            then=zero_is_none,
        ),
    )
    run_memory_limit: int | None = field(
        default=DEFAULT_RUN_MEMORY_LIMIT,
        metadata=setting(
            "--run-memory-limit",
            parse=size,
            metavar="SIZE",
            help="memory of all a run's processes, where cgroups allow (default: 1Gi; 0: no cap)",
            then=zero_is_none,
        ),
    )
    reconcile_run_nice: int = field(  # how far reconcile runs yield the CPU (runner/priority.py)
        default=10,
        metadata=setting(
            "--reconcile-run-nice",
            parse=int,
            choices=range(20),
            metavar="0..19",
            help="nice increment of reconcile runs' processes, so that the operator itself and "
            "admission runs get the CPU first when it runs out (default: 10; 0: as the operator)",
        ),
    )
    graceful_shutdown_timeout: float = field(
        default=30.0,
        metadata=setting("--graceful-shutdown-timeout", parse=go_duration, metavar="DURATION"),
    )
    runner_dir: Path | None = field(
        default=None,
        metadata=setting(
            "--runner-dir",
            parse=Path,
            help="where run directories and artifacts are kept "
            "(default: a private temporary directory)",
        ),
    )
    runner_dir_max_size: int | None = field(
        default=DEFAULT_RUNNER_DIR_MAX_SIZE,
        metadata=setting(
            "--runner-dir-max-size",
            parse=size,
            metavar="SIZE",
            help="bytes the runner directory may take; the oldest artifacts are pruned "
            "(default: 1Gi; 0: no cap)",
            then=zero_is_none,
        ),
    )
    runner_dir_max_files: int | None = field(
        default=DEFAULT_RUNNER_DIR_MAX_FILES,
        metadata=setting(
            "--runner-dir-max-files",
            parse=file_count,
            metavar="N",
            help="files and directories (inodes) the runner directory may hold; the oldest "
            "artifacts are pruned (default: 50000; 0: no cap)",
            then=zero_is_none,
        ),
    )
    # warm: modules run in forks of a warm interpreter (runner/warm/module_server.py);
    # reference: a fresh interpreter per task, as Operator SDK's operator does.
    runner_mode: str = field(
        default="warm",
        metadata=setting(
            "--runner-mode",
            choices=("warm", "reference"),
            help="warm: Ansible modules run in forks of a warm interpreter (fast); "
            "reference: a fresh interpreter per task, as Operator SDK does",
        ),
    )
    # Warm-runner accelerations not to use (runner/warm/accelerations/), by name.
    disabled_accelerations: tuple[str, ...] = field(
        default=(),
        metadata=setting(
            "--disable-acceleration",
            parse=acceleration_list,
            repeated=True,
            metavar="NAME[,NAME]",
            help="a warm-runner acceleration not to use (see `ansible-operator doctor`); "
            "repeatable",
            then=flattened,
        ),
    )
