"""Failover: how long a standby needs, after the leader stops or dies, before its first reconcile.

    .venv/bin/python bench/failover.py [--rounds 5] [--objects 20] [--lease 15s]
                                       [--renew 10s] [--retry 2s] [--mode warm|reference]

Two replicas of bench/operator with `--leader-elect` (the durations given: by
default the operator's own) watch one namespace holding `--objects` Memcacheds.
Each round, once the leader is quiet (nothing queued, no run in flight: a
leader stopped mid-run releases the Lease only once its runs end, up to
--graceful-shutdown-timeout) and the standby is ready (its caches synced)
with its warm runner up (`ansible_operator_warm_runner_pid`), the leader is
stopped, one round with SIGTERM (`clean`: it releases the Lease as it exits),
the next with SIGKILL (`kill -9`: the Lease must expire), then the stopped one
is started again as the new standby. Times from the signal,
read from the standby's metrics every 20 ms:

    leader gone    the old leader's process has exited
    leads          the standby's leader_election_master_status is 1
    first taken    its first reconcile began: a worker took a key
                   (ansible_operator_queue_duration_seconds_count; n/a on an
                   operator without that metric)
    first done     its first reconcile ended (ansible_operator_reconciles_count)

What it reconciles first are the objects its list queued while it stood by.
Targets (issue 43): clean exit -> first reconcile within 3 s; kill -9 -> within
the lease duration + 2 s. Run with PYTHONPATH=<another tree>/src to time
another version of the operator with the same bench.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
import urllib.error
import uuid
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from ansible_operator.cluster import provide
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.metrics import metric_value, scrape
from ansible_operator.testing.operator import SERVE_METRICS, OperatorProcess
from ansible_operator.values.durations import parse_duration
from reconcile import GROUP, HERE, PLURAL, VERSION, memcached
from scale import api_client, count_successful

POLL = 0.02  # seconds between two reads of the standby's metrics
RUN_LABEL = "bench.ansible-operator.io/failover-run"


@dataclass
class Round:
    way: str  # clean, kill
    gone: float | None = None
    leads: float | None = None
    first_taken: float | None = None
    first_done: float | None = None


def figures(operator: OperatorProcess) -> dict[str, float | None]:
    """What the bench reads of a replica (None: not exposed by this operator)."""
    text = scrape(operator.port("metrics"))

    def value(name: str) -> float | None:
        return metric_value(text, name) if name in text else None

    return {
        "leads": value("leader_election_master_status"),
        "taken": value("ansible_operator_queue_duration_seconds_count"),
        "done": value("ansible_operator_reconciles_count"),
        "warm": value("ansible_operator_warm_runner_pid"),
        "busy": (value("ansible_operator_queue_depth") or 0)
        + (value("ansible_operator_runs_in_flight") or 0),
    }


def wait_until(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, urllib.error.URLError, AssertionError):
            if check():  # type: ignore[operator]
                return
        time.sleep(0.1)
    raise SystemExit(f"{what}: not within {timeout:.0f} s")


def standing_by(operator: OperatorProcess, mode: str) -> None:
    """Started, ready, and (warm mode) its warm runner up."""
    operator.start(timeout=300)
    if mode == "warm":
        wait_until("the standby's warm runner", lambda: figures(operator)["warm"], 300)


def take_over(leader: OperatorProcess, standby: OperatorProcess, way: str) -> Round:
    """Stop `leader` the `way` given; times until the standby leads and reconciles."""
    assert leader.process is not None
    result = Round(way)
    wait_until("the leader quiet", lambda: figures(leader)["busy"] == 0, 600)
    before = figures(standby)
    if before["leads"] != 0:
        raise SystemExit(f"the standby is not standing by: {before}")
    started = time.monotonic()
    os.killpg(leader.process.pid, signal.SIGTERM if way == "clean" else signal.SIGKILL)
    deadline = started + 300
    while time.monotonic() < deadline and result.first_done is None:
        now = time.monotonic() - started
        if result.gone is None and leader.process.poll() is not None:
            result.gone = now
        with contextlib.suppress(OSError, urllib.error.URLError):
            seen = figures(standby)
            if result.leads is None and seen["leads"] == 1:
                result.leads = now
            taken, done = seen["taken"], seen["done"]
            if result.first_taken is None and taken is not None and taken > (before["taken"] or 0):
                result.first_taken = now
            if done is not None and done > (before["done"] or 0):
                result.first_done = now
        time.sleep(POLL)
    leader.stop()  # reaped (a clean one has exited already)
    if result.gone is None:
        result.gone = time.monotonic() - started
    return result


def _cell(value: float | None) -> str:
    return f"{'n/a':>11}" if value is None else f"{value:>11.2f}"


def report(rounds: list[Round], args: argparse.Namespace, lease: float) -> None:
    print(
        f"\nfailover: 2 replicas with --leader-elect (lease {args.lease}, renew {args.renew}, "
        f"retry {args.retry}), {args.objects} objects, {args.mode} mode, {os.cpu_count()} CPUs; "
        "seconds from the leader's signal"
    )
    print(
        f"{'way':<8} {'round':>5} {'leader gone':>11} {'leads':>11} {'first taken':>11} "
        f"{'first done':>11}"
    )
    for number, each in enumerate(rounds, 1):
        print(
            f"{each.way:<8} {number:>5} {_cell(each.gone)} {_cell(each.leads)} "
            f"{_cell(each.first_taken)} {_cell(each.first_done)}"
        )
    for way, target in (("clean", 3.0), ("kill", lease + 2.0)):
        mine = [each for each in rounds if each.way == way]
        if not mine:
            continue
        cells = []
        for field in ("gone", "leads", "first_taken", "first_done"):
            values = [v for v in (getattr(each, field) for each in mine) if v is not None]
            cells.append(f"{statistics.median(values):.2f}/{max(values):.2f}" if values else "n/a")
        print(
            f"{way:<8} median/max: leader gone {cells[0]}, leads {cells[1]}, first taken "
            f"{cells[2]}, first done {cells[3]} (target: first reconcile within {target:g} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each way")
    parser.add_argument("--objects", type=int, default=20)
    parser.add_argument("--lease", default="15s", help="--leader-elect-lease-duration")
    parser.add_argument("--renew", default="10s", help="--leader-elect-renew-deadline")
    parser.add_argument("--retry", default="2s", help="--leader-elect-retry-period")
    parser.add_argument("--mode", choices=("warm", "reference"), default="warm")
    args = parser.parse_args()
    lease = parse_duration(args.lease)
    run = uuid.uuid4().hex[:6]
    namespace = f"failover-{run}"
    logs = Path(tempfile.mkdtemp(prefix=f"ansible-operator-failover-{run}-"))
    print(f"operator logs: {logs}", file=sys.stderr)
    rounds: list[Round] = []
    with provide(progress=lambda m: print(m, file=sys.stderr)) as cluster:
        api = api_client(cluster.kubeconfig, 4)
        apply_manifests(api, HERE / "crd.yaml")
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace(
            client.V1Namespace(
                metadata=client.V1ObjectMeta(name=namespace, labels={RUN_LABEL: run})
            )
        )
        replicas: list[OperatorProcess] = []
        try:
            for index in range(args.objects):
                body = memcached(f"m-{index}", index)
                body["metadata"]["labels"] = {RUN_LABEL: run}
                custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
            operator_args = [
                "--leader-elect",
                f"--leader-election-namespace={namespace}",
                "--leader-election-id=failover-bench",
                f"--leader-elect-lease-duration={args.lease}",
                f"--leader-elect-renew-deadline={args.renew}",
                f"--leader-elect-retry-period={args.retry}",
                f"--runner-mode={args.mode}",
                SERVE_METRICS,
            ]
            replicas = [
                OperatorProcess(
                    HERE / "watches.yaml",
                    cluster.kubeconfig,
                    log_path=logs / f"{name}.log",
                    args=operator_args,
                    env={"WATCH_NAMESPACE": namespace, "ANSIBLE_GATHERING": "explicit"},
                )
                for name in ("a", "b")
            ]
            leader, standby = replicas
            leader.start(timeout=300)
            leader.wait_leading(timeout=300)
            wait_until(
                "every object Successful",
                lambda: count_successful(custom, f"{RUN_LABEL}={run}") >= args.objects,
                600,
            )
            standing_by(standby, args.mode)
            for number in range(2 * args.rounds):
                way = "clean" if number % 2 == 0 else "kill"
                rounds.append(take_over(leader, standby, way))
                print(f"round {number + 1}: {rounds[-1]}", file=sys.stderr)
                leader, standby = standby, leader
                standing_by(standby, args.mode)
        finally:
            for replica in replicas:
                replica.stop()
            with contextlib.suppress(client.ApiException):
                core.delete_namespace(namespace)
    report(rounds, args, lease)


if __name__ == "__main__":
    main()
