"""Reconcile benchmark: N Memcached-style objects created at once, per runner mode.

    .venv/bin/python bench/reconcile.py [--objects 1,10,50] [--concurrency 2]
                                        [--modes reference,default] [--steady 60]

For each N and each mode (same concurrency), on the local control plane (or
KUBECONFIG): start `ansible-operator run` over bench/operator, create N objects
at once, and measure per-object latency from creation to `Successful` (p50,
p95, max), the makespan, the operator's CPU seconds and peak resident memory
including every Ansible child process, and API requests per reconcile (the operator's
own count of what it and its runs sent to the API server, and of the reads it
answered from its cache). Then, with nothing changing for
`--steady` seconds, the number of Ansible runs (should be 0). Prints one table
with the ratios to `reference`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client, config

from ansible_operator.cluster import provide
from ansible_operator.runner import proctree
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess

HERE = Path(__file__).resolve().parent / "operator"
GROUP, VERSION, PLURAL = "bench.ansible-operator.io", "v1alpha1", "memcacheds"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    mode: str
    objects: int
    latencies: list[float] = field(default_factory=list)
    makespan: float = 0.0
    cpu_seconds: float = 0.0
    peak_pss_mib: float = 0.0
    requests_per_reconcile: float = 0.0
    cache_hits_per_reconcile: float = 0.0
    steady_runs: int = 0


def memcached(name: str, index: int) -> dict:
    """One benchmark object; sizes vary so Deployments differ."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Memcached",
        "metadata": {"name": name},
        "spec": {"size": 1 + index % 3},
    }


def _memory_mib(pids: list[int]) -> float:
    """Proportional set size: pages shared by forks are counted once, not per process."""
    total_kib = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
    return total_kib / 1024


def _cpu_seconds(root: int) -> float:
    """CPU of the live tree, plus every reaped descendant's (each parent waits
    for its children, so theirs is in the parent's children-times)."""
    total = 0
    for pid in proctree.tree(root):
        if fields := proctree.stat_fields(pid):
            total += sum(int(value) for value in fields[11:15])
    return total / CLOCK_TICKS


def metrics_url(operator: OperatorProcess) -> str:
    """Where the operator serves its metrics (it binds a free port)."""
    match = re.search(r"metrics server listening address=\('[\d.]+', (\d+)\)", operator.logs)
    if not match:
        raise SystemExit("the operator did not log its metrics address")
    return f"http://127.0.0.1:{match.group(1)}/metrics"


def metric_total(url: str, *prefixes: str) -> list[float]:
    """For each prefix, the sum of the samples whose lines start with it."""
    with urllib.request.urlopen(url, timeout=5) as page:
        lines = page.read().decode().splitlines()
    return [
        sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))
        for prefix in prefixes
    ]


def _operator_requests(operator: OperatorProcess) -> tuple[float, float]:
    """(requests the operator and its runs sent to the API server, reads
    answered from its cache), from its own metrics."""
    sent, hits = metric_total(
        metrics_url(operator),
        "ansible_operator_api_requests_total{",
        "ansible_operator_proxy_cache_hits_total",
    )
    return sent, hits


def measure(
    kubeconfig: Path,
    api: client.ApiClient,
    mode: str,
    objects: int,
    concurrency: int,
    steady: float,
) -> Result:
    result = Result(mode, objects)
    custom = client.CustomObjectsApi(api)
    namespace = f"bench-{mode}-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
    )
    log_path = Path(f"/tmp/ansible-operator-bench-{namespace}.log")
    args = [
        f"--max-concurrent-reconciles={concurrency}",
        f"--runner-mode={mode}",
        "--metrics-bind-address=127.0.0.1:0",
    ]
    operator = OperatorProcess(
        HERE / "watches.yaml",
        kubeconfig,
        log_path=log_path,
        args=args,
        env={"WATCH_NAMESPACE": namespace},
    ).start()
    assert operator.process is not None
    root = operator.process.pid
    peak = [_memory_mib(proctree.tree(root))]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], _memory_mib(proctree.tree(root)))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        cpu_before = _cpu_seconds(root)
        requests_before, hits_before = _operator_requests(operator)
        created: dict[str, float] = {}
        started = time.monotonic()
        for index in range(objects):
            name = f"m-{index}"
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, memcached(name, index)
            )
            created[name] = time.monotonic()
        done: dict[str, float] = {}
        deadline = time.monotonic() + 120 + objects * 10
        while len(done) < objects and time.monotonic() < deadline:
            for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)[
                "items"
            ]:
                name = item["metadata"]["name"]
                conditions = (item.get("status") or {}).get("conditions") or []
                if name not in done and any(
                    c["type"] == "Successful" and c["status"] == "True" for c in conditions
                ):
                    done[name] = time.monotonic()
            time.sleep(0.05)
        if len(done) < objects:
            raise SystemExit(f"{mode}: only {len(done)}/{objects} Successful; see {log_path}")
        result.makespan = max(done.values()) - started
        result.latencies = [done[name] - created[name] for name in created]
        result.cpu_seconds = _cpu_seconds(root) - cpu_before
        requests_after, hits_after = _operator_requests(operator)
        result.requests_per_reconcile = (requests_after - requests_before) / objects
        result.cache_hits_per_reconcile = (hits_after - hits_before) / objects
        runs_before = len(re.findall(r"run started", operator.logs))
        time.sleep(steady)
        result.steady_runs = len(re.findall(r"run started", operator.logs)) - runs_before
    finally:
        sampling.set()
        sampler.join()
        result.peak_pss_mib = peak[0]
        operator.stop()
        client.CoreV1Api(api).delete_namespace(namespace)
    return result


def report(results: list[Result]) -> None:
    print(
        f"{'N':>4} {'mode':<10} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'makespan s':>10} "
        f"{'CPU s':>7} {'peak MiB':>9} {'req/rec':>8} {'hits/rec':>8} {'steady runs':>11} "
        f"{'p50 x':>6} {'makespan x':>10}"
    )
    reference = {r.objects: r for r in results if r.mode == "reference"}
    for r in results:
        ordered = sorted(r.latencies)
        p50 = statistics.median(ordered)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        base = reference.get(r.objects)
        p50_ratio = statistics.median(base.latencies) / p50 if base else float("nan")
        makespan_ratio = base.makespan / r.makespan if base else float("nan")
        print(
            f"{r.objects:>4} {r.mode:<10} {p50:>7.2f} {p95:>7.2f} {max(ordered):>7.2f} "
            f"{r.makespan:>10.2f} {r.cpu_seconds:>7.1f} {r.peak_pss_mib:>9.0f} "
            f"{r.requests_per_reconcile:>8.1f} {r.cache_hits_per_reconcile:>8.1f} "
            f"{r.steady_runs:>11} "
            f"{p50_ratio:>5.1f}x {makespan_ratio:>9.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="1,10,50", help="comma list of N")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--modes", default="reference,warm")
    parser.add_argument("--steady", type=float, default=60.0, help="seconds of quiet to watch")
    args = parser.parse_args()
    with provide(progress=lambda m: print(m, file=sys.stderr)) as cluster:
        with config.new_client_from_config(str(cluster.kubeconfig)) as api:
            apply_manifests(api, HERE / "crd.yaml")
            results = []
            for count in (int(n) for n in args.objects.split(",")):
                for mode in args.modes.split(","):
                    print(f"N={count} mode={mode} ...", file=sys.stderr)
                    results.append(
                        measure(cluster.kubeconfig, api, mode, count, args.concurrency, args.steady)
                    )
        print(
            f"\nMemcached-style role (Deployment, Service, ConfigMap, status), "
            f"{args.concurrency} concurrent reconciles, {os.cpu_count()} CPUs"
        )
        report(results)


if __name__ == "__main__":
    main()
