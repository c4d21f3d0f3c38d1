"""Reconcile benchmark: N Memcached-style objects created at once, per runner mode.

    .venv/bin/python bench/reconcile.py [--objects 1,10,50] [--concurrency 2] [--gather-facts]
                                        [--modes reference,warm] [--steady 60] [--quiet 5]
                                        [--cpu-limit none,1] [--ansible-core 2.18,2.21]
                                        [--tracing off,on]

For each N and each mode (same concurrency), on the local control plane (or
KUBECONFIG): start `ansible-operator run` over bench/operator, create N objects
at once, and measure per-object latency from creation to `Successful` (p50,
p95, max), the makespan; after `--steady` seconds of quiet, change every
object's spec at once and measure the same from the change to `Successful`
again (`chg`: reconciles of a settled operator, without its start-up); the
operator's CPU seconds (creation phase) and peak resident memory including
every Ansible child process, and API requests per reconcile (the operator's
own count of what it and its runs sent to the API server, and of the reads it
answered from its cache), and each run's wall time per task (`ms/task`: the
median run's duration over its task count, what Ansible's machinery costs per
task, over every run). Between the two, with nothing changing for
`--steady` seconds, the number of Ansible runs (should be 0). And the
operator's start: seconds from starting its process to the first 200 from its
/readyz (`ready s`), and its idle memory: once every change is Successful and
nothing ran or waited in its queue for `--quiet` seconds (its own
runs-in-flight and queue-depth metrics), the PSS of its whole process tree,
the warm runner's processes included (`idle PSS`, MiB). Prints one table with
the ratios to `reference`.

`--cpu-limit none,1` runs all of that once per limit (same N and modes), the
operator and every run in a cgroup with a CPU quota of that many CPUs, as a
Pod's CPU limit sets one (`cpu.max` "100000 100000" on cgroup v2, or
cpu.cfs_quota_us where the cpu controller is on v1: bench/cpu_limit.py), and
prints one table per limit, the limit in its header; `none`: no quota. Root
only: the operator then runs in a group of its own whatever the limit, and
`CPU s` is that group's CPU time (cgroup cpu.stat usage_usec: every process
the operator ran, exactly); where no group can be made (not root), `none`
takes the CPU times of the operator's process tree instead. Default: `none`.
Runs gather no facts (ANSIBLE_GATHERING=explicit, as Operator SDK's scaffolded
manager.yaml has it) unless `--gather-facts`.

`--tracing off,on` runs each N and mode once per setting, one after the other:
`on` with OpenTelemetry traces sent to a real collector (tools/otel-collector,
built with Go, started once for the bench; OTEL_EXPORTER_OTLP_ENDPOINT set, the
SDK's default batching), its rows labelled `MODE+traces`; then one more table,
tracing's overhead per N and mode: p50 and CPU seconds off and on, and the
spans the collector received per reconcile. Default: `off`.

`--ansible-core 2.18,2.21` runs all of that in each release's environment
(scripts/ansible_env.py makes them, cached under ~/.cache/ansible-operator/venvs/,
all on the newest Python found), one after the other on one cluster, and ends
with one table of every mode side by side per release. Without it: the
environment this runs in.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config

import cpu_limit
from ansible_operator.cluster import provide
from ansible_operator.runner import proctree
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess

HERE = Path(__file__).resolve().parent / "operator"
TESTS = Path(__file__).resolve().parent.parent / "tests"
ANSIBLE_ENV = Path(__file__).resolve().parent.parent / "scripts" / "ansible_env.py"
GROUP, VERSION, PLURAL = "bench.ansible-operator.io", "v1alpha1", "memcacheds"
# As the operator logs a run: its wall time, and how many tasks it ran (ok + changed are
# counted in `ok`, failures apart).
RUN_LINE = re.compile(r"run succeeded .* duration=([\d.]+)s ok=(\d+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT = 120.0  # seconds from the operator's start to its /readyz 200


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
    # Then every object's spec changed at once, on the settled operator.
    change_latencies: list[float] = field(default_factory=list)
    change_makespan: float = 0.0
    run_seconds: list[float] = field(default_factory=list)  # each run's wall time
    tasks_per_run: float = 0.0
    cpu_limit: str = "none"  # CPUs of the operator's quota, as given to --cpu-limit
    quota: str = ""  # how the quota was set (the cgroup file), "" without a group
    throttled_seconds: float = 0.0  # the time the quota held the operator back
    ready_seconds: float = float("nan")  # process start -> first /readyz 200
    idle_pss_mib: float = float("nan")  # the whole tree, settled and quiet
    error: str = ""  # why this mode gave no figures
    tracing: bool = False  # traces sent to a collector (--tracing on)
    spans_per_reconcile: float = 0.0  # what the collector received, with tracing on

    @property
    def label(self) -> str:
        return f"{self.mode}+traces" if self.tracing else self.mode

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies)

    @property
    def change_p50(self) -> float:
        return statistics.median(self.change_latencies)

    @property
    def per_task_ms(self) -> float:
        """A run's wall time per task (median run), in milliseconds: Ansible's overhead,
        the API work being a few milliseconds of it."""
        if not self.run_seconds or not self.tasks_per_run:
            return float("nan")
        return statistics.median(self.run_seconds) / self.tasks_per_run * 1000


class BenchFailed(Exception):
    """One mode did not reconcile every object; the others still run."""


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
    return f"http://127.0.0.1:{operator.port('metrics')}/metrics"


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
    gather_facts: bool = False,
    limit: str = "none",
    quiet: float = 5.0,
    collector: Any = None,  # otel_collector.Collector: tracing on, spans sent there
) -> Result:
    result = Result(mode, objects, cpu_limit=limit, tracing=collector is not None)
    custom = client.CustomObjectsApi(api)
    namespace = f"bench-{mode}{'-traces' if collector else ''}-{uuid.uuid4().hex[:6]}"
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
        # Operator SDK's scaffolded manager.yaml sets ANSIBLE_GATHERING=explicit: roles
        # run without facts where its users deploy them.
        env={"WATCH_NAMESPACE": namespace}
        | ({} if gather_facts else {"ANSIBLE_GATHERING": "explicit"})
        | ({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint} if collector else {}),
    )
    spans_before = len(collector.spans()) if collector else 0
    peak = [0.0]
    sampling = threading.Event()
    sampler: threading.Thread | None = None
    group: cpu_limit.CpuGroup | None = None
    try:
        try:
            group = cpu_limit.CpuGroup.make(None if limit == "none" else float(limit))
        except cpu_limit.Unavailable as error:
            if limit != "none":
                raise BenchFailed(f"no cgroup for a CPU limit: {error}") from error
        except OSError as error:
            raise BenchFailed(f"could not make the operator's cgroup: {error}") from error
        result.quota = group.quota if group else ""
        result.ready_seconds = start_until_ready(operator, group)
        assert operator.process is not None
        root = operator.process.pid

        def processes() -> list[int]:
            """The operator's tree, and whatever else is in its cgroups."""
            return sorted(set(proctree.tree(root)) | (group.pids() if group else set()))

        def sample() -> None:
            while not sampling.is_set():
                peak[0] = max(peak[0], _memory_mib(processes()))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        tree_cpu_before = _cpu_seconds(root)
        cpu_before = group.cpu_seconds() if group else 0.0
        requests_before, hits_before = _operator_requests(operator)
        created: dict[str, float] = {}
        started = time.monotonic()
        for index in range(objects):
            name = f"m-{index}"
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, memcached(name, index)
            )
            created[name] = time.monotonic()
        done = _wait_successful(custom, namespace, objects, {}, log_path)
        result.makespan = max(done.values()) - started
        result.latencies = [done[name] - created[name] for name in created]
        tree_cpu = _cpu_seconds(root) - tree_cpu_before
        result.cpu_seconds = group.cpu_seconds() - cpu_before if group else tree_cpu
        if group:
            print(
                f"CPU s, creation phase: {result.cpu_seconds:.2f} (cgroup), "
                f"{tree_cpu:.2f} (process tree)",
                file=sys.stderr,
            )
        requests_after, hits_after = _operator_requests(operator)
        result.requests_per_reconcile = (requests_after - requests_before) / objects
        result.cache_hits_per_reconcile = (hits_after - hits_before) / objects
        runs_before = len(re.findall(r"run started", operator.logs))
        time.sleep(steady)
        result.steady_runs = len(re.findall(r"run started", operator.logs)) - runs_before
        # Then every object's spec changed at once, on the settled operator.
        previous = _successful_since(custom, namespace)
        changed: dict[str, float] = {}
        started = time.monotonic()
        for index in range(objects):
            name = f"m-{index}"
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": {"size": 4 + index % 3}}
            )
            changed[name] = time.monotonic()
        done = _wait_successful(custom, namespace, objects, previous, log_path)
        result.change_makespan = max(done.values()) - started
        result.change_latencies = [done[name] - changed[name] for name in changed]
        runs = RUN_LINE.findall(operator.logs)
        result.run_seconds = [float(duration) for duration, _ in runs]
        result.tasks_per_run = statistics.median(int(ok) for _, ok in runs) if runs else 0.0
        if wait_quiet(operator, quiet):
            result.idle_pss_mib = _memory_mib(processes())
        else:
            print(f"{mode}: never quiet for {quiet:.0f} s; no idle PSS", file=sys.stderr)
        if group and group.throttled:
            result.throttled_seconds = group.throttled_seconds()
            print(f"cpu.stat of the quota's group: {group.throttling()}", file=sys.stderr)
    finally:
        sampling.set()
        if sampler:
            sampler.join()
        result.peak_pss_mib = peak[0]
        operator.stop()  # flushes its last spans
        if collector:
            received = len(collector.spans()) - spans_before
            result.spans_per_reconcile = received / (2 * objects + result.steady_runs)
        if group:
            group.remove()
        client.CoreV1Api(api).delete_namespace(namespace)
    return result


def start_until_ready(operator: OperatorProcess, group: cpu_limit.CpuGroup | None) -> float:
    """Start the operator (in `group`, joined as soon as its process exists,
    before it imports anything); seconds from the start to its first /readyz 200."""
    started = time.monotonic()
    operator.start(wait_ready=False)
    assert operator.process is not None
    if group:
        try:
            group.join(operator.process.pid)
        except OSError as error:
            raise BenchFailed(
                f"could not move the operator into {group.groups}: {error}"
            ) from error
    deadline = started + READY_TIMEOUT
    while time.monotonic() < deadline:
        if operator.process.poll() is not None:
            code = operator.process.returncode
            raise BenchFailed(f"the operator exited with {code}; see {operator.log_path}")
        with contextlib.suppress(AssertionError, OSError, urllib.error.URLError):
            if operator.health("/readyz") == 200:
                seconds = time.monotonic() - started
                break
        time.sleep(0.02)
    else:
        raise BenchFailed(f"no /readyz 200 in {READY_TIMEOUT:.0f} s; see {operator.log_path}")
    return seconds


def wait_quiet(operator: OperatorProcess, seconds: float, timeout: float = 120.0) -> bool:
    """Until no run was in flight and no key queued for `seconds` (the
    operator's own gauges, read twice a second); False if not in `timeout`."""
    url = metrics_url(operator)
    deadline = time.monotonic() + timeout
    busy_at = time.monotonic()
    while time.monotonic() < deadline:
        runs, queued = metric_total(
            url, "ansible_operator_runs_in_flight{", "ansible_operator_queue_depth{"
        )
        if runs or queued:
            busy_at = time.monotonic()
        elif time.monotonic() - busy_at >= seconds:
            return True
        time.sleep(0.5)
    return False


def _successful(item: dict) -> dict | None:
    conditions = (item.get("status") or {}).get("conditions") or []
    return next(
        (c for c in conditions if c["type"] == "Successful" and c["status"] == "True"), None
    )


def _successful_since(custom: client.CustomObjectsApi, namespace: str) -> dict[str, str]:
    """Each object's time of its last transition to Successful."""
    items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
    return {
        item["metadata"]["name"]: (_successful(item) or {}).get("lastTransitionTime", "")
        for item in items
    }


def _wait_successful(
    custom: client.CustomObjectsApi,
    namespace: str,
    objects: int,
    previous: dict[str, str],
    log_path: Path,
) -> dict[str, float]:
    """When each object became Successful (again: a transition other than
    `previous`'s; a run sets Successful False while it runs)."""
    done: dict[str, float] = {}
    deadline = time.monotonic() + 120 + objects * 10
    while len(done) < objects and time.monotonic() < deadline:
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)[
            "items"
        ]:
            name = item["metadata"]["name"]
            successful = _successful(item)
            if (
                name not in done
                and successful is not None
                and successful.get("lastTransitionTime") != previous.get(name)
            ):
                done[name] = time.monotonic()
            conditions = (item.get("status") or {}).get("conditions") or []
            failed = [c for c in conditions if c["type"] == "Failure" and c["status"] == "True"]
            # Nothing succeeded and a run failed: the mode does not work here (say
            # why now rather than after the deadline).
            if failed and not done:
                message = " ".join(failed[0].get("message", "").split())[-400:]
                raise BenchFailed(f"{name}: Failure condition: {message}; see {log_path}")
        time.sleep(0.05)
    if len(done) < objects:
        raise BenchFailed(f"only {len(done)}/{objects} Successful; see {log_path}")
    return done


def limit_title(limit: str, results: list[Result]) -> str:
    """A table's CPU limit, and how it was set."""
    if limit == "none":
        return "CPU limit: none"
    quota = next((r.quota for r in results if r.quota), "")
    return f"CPU limit: {limit} CPU" + (f" ({quota})" if quota else "")


def report(
    results: list[Result], quiet: float = 5.0, cost: tuple[int, float] | None = None
) -> None:
    """One table per CPU limit, in the order run."""
    for limit in dict.fromkeys(r.cpu_limit for r in results):
        subset = [r for r in results if r.cpu_limit == limit]
        print(f"\n{limit_title(limit, subset)}")
        report_limit(subset)
        throttled = [
            f"N={r.objects} {r.mode} {r.throttled_seconds:.1f} s"
            for r in subset
            if r.quota and limit != "none" and not r.error
        ]
        if throttled:
            listed = ", ".join(throttled)
            print(f"throttled by the quota (cgroup cpu.stat, summed over CPUs): {listed}")
    print(
        "(ready s: the operator's start -> first /readyz 200; idle PSS: its whole process "
        f"tree in MiB, once nothing ran nor was queued for {quiet:.0f} s after the changes)"
    )
    report_tracing(results, cost)


def report_tracing(results: list[Result], cost: tuple[int, float] | None = None) -> None:
    """Per CPU limit, N and mode measured with tracing off and on (each maybe more
    than once, alternating: their objects pooled): what tracing costs."""
    groups: dict[tuple[str, int, str, bool], list[Result]] = {}
    for r in results:
        if not r.error:
            groups.setdefault((r.cpu_limit, r.objects, r.mode, r.tracing), []).append(r)
    rows = [
        (key, groups[key], groups[(*key[:3], True)])
        for key in groups
        if not key[3] and (*key[:3], True) in groups
    ]
    if not rows:
        return

    def change(off: float, on: float) -> str:
        return f"{(on / off - 1) * 100:+.1f}%" if off else "n/a"

    def pooled(runs: list[Result]) -> tuple[float, float, float, float]:
        return (
            statistics.median(x for r in runs for x in r.latencies),
            statistics.median(x for r in runs for x in r.change_latencies),
            statistics.mean(r.cpu_seconds for r in runs),
            statistics.mean(r.spans_per_reconcile for r in runs),
        )

    print("\nTracing overhead: the same N and mode, traces off and on (sent to a real collector)")
    print(
        f"{'limit':>5} {'N':>4} {'mode':<10} {'runs':>5} {'p50 off':>8} {'p50 on':>8} {'p50':>7}  "
        f"{'chg p50 off':>11} {'chg p50 on':>10} {'chg p50':>7}  "
        f"{'CPU s off':>9} {'CPU s on':>8} {'CPU':>7}  {'spans/rec':>9}"
    )
    for (limit, count, mode, _), offs, ons in rows:
        p50_off, chg_off, cpu_off, _ = pooled(offs)
        p50_on, chg_on, cpu_on, spans = pooled(ons)
        print(
            f"{limit:>5} {count:>4} {mode:<10} {len(offs):>2}+{len(ons):<2} {p50_off:>8.2f} "
            f"{p50_on:>8.2f} {change(p50_off, p50_on):>7}  {chg_off:>11.2f} {chg_on:>10.2f} "
            f"{change(chg_off, chg_on):>7}  {cpu_off:>9.1f} {cpu_on:>8.1f} "
            f"{change(cpu_off, cpu_on):>7}  {spans:>9.1f}"
        )
    if cost is not None:
        spans, seconds = cost
        print(
            f"the spans of one reconcile ({spans}: reconcile, run, 8 tasks, 12 requests) cost "
            f"{seconds * 1e3:.2f} ms of the operator's CPU, made and exported to the collector "
            "(in this process, the SDK's defaults, averaged over 500)"
        )


def _event_time(ns: int) -> str:
    """A time as ansible-runner stamps an event."""
    seconds, rest = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1000:06d}+00:00"


def tracing_cpu(endpoint: str, reconciles: int = 500) -> tuple[int, float]:
    """CPU seconds (every thread of this process: the exporter's too) that the spans of
    one typical reconcile cost, made by the operator's own code (a run's events and
    requests through RunTrace) with the real SDK, and exported to the collector."""
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    from ansible_operator.observability.otel import OtelTracer
    from ansible_operator.observability.request_spans import ApiRequest
    from ansible_operator.observability.tracing import Tracing
    from ansible_operator.runner.redaction import Redactor
    from ansible_operator.runner.run_trace import RunTrace

    tracer = OtelTracer.from_environment()
    tracing = Tracing(tracer)
    tasks, requests = 8, 12
    started = time.process_time()
    for index in range(reconciles):
        reconcile = tracer.start(
            "reconcile Memcached", parent=None, attributes={"k8s.object.name": f"m-{index}"}
        )
        with tracing.current_span(reconcile):
            run = RunTrace(tracer, parent=tracing.current(), attributes={}, redactor=Redactor())
            clock = time.time_ns()
            for task in range(tasks):
                data = {
                    "task": f"Task {task}",
                    "task_uuid": f"{index}-{task}",
                    "host": "localhost",
                    "task_path": f"/opt/ansible/roles/memcached/tasks/main.yml:{task * 8 + 1}",
                    "task_action": "kubernetes.core.k8s",
                    "role": "memcached",
                }
                begin, end = clock + task * 10_000_000, clock + task * 10_000_000 + 9_000_000
                run.event(
                    {"event": "runner_on_start", "created": _event_time(begin), "event_data": data}
                )
                for request in range(2 if task < requests - tasks else 1):
                    at = begin + 1_000_000 + request
                    run.request(
                        ApiRequest(
                            method="GET",
                            path="/apis/apps/v1/namespaces/ns/deployments/m",
                            group="apps",
                            plural="deployments",
                            subresource="",
                            namespace="ns",
                            name="m",
                            watch=False,
                            status=200,
                            start_ns=at,
                            end_ns=at + 1_000_000,
                        )
                    )
                timing = {"start": _event_time(begin), "end": _event_time(end)}
                run.event(
                    {
                        "event": "runner_on_ok",
                        "created": _event_time(end),
                        "event_data": {**data, **timing, "res": {"changed": True}},
                    }
                )
            run.end({"ansible.run.status": "successful"})
        reconcile.set({"reconcile.result": "succeeded"})
        reconcile.end()
    tracer.provider.force_flush()
    seconds = (time.process_time() - started) / reconciles
    tracer.provider.shutdown()
    return 2 + tasks + requests, seconds


def report_limit(results: list[Result]) -> None:
    print(
        f"{'N':>4} {'mode':<12} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'makespan s':>10} "
        f"{'CPU s':>7} {'peak MiB':>9} {'req/rec':>8} {'hits/rec':>8} {'steady runs':>11} "
        f"{'ms/task':>8} {'p50 x':>6} {'makespan x':>10}  "
        f"{'chg p50 s':>9} {'chg makespan s':>14} {'chg p50 x':>9} {'chg makespan x':>14}  "
        f"{'ready s':>7} {'idle PSS':>8}"
    )
    reference = {
        r.objects: r for r in results if r.mode == "reference" and not r.tracing and not r.error
    }
    for r in results:
        if r.error:
            print(f"{r.objects:>4} {r.label:<12} failed: {r.error}")
            continue
        ordered = sorted(r.latencies)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        base = reference.get(r.objects)
        p50_ratio = base.p50 / r.p50 if base else float("nan")
        makespan_ratio = base.makespan / r.makespan if base else float("nan")
        change_ratio = base.change_p50 / r.change_p50 if base else float("nan")
        change_makespan_ratio = base.change_makespan / r.change_makespan if base else float("nan")
        print(
            f"{r.objects:>4} {r.label:<12} {r.p50:>7.2f} {p95:>7.2f} {max(ordered):>7.2f} "
            f"{r.makespan:>10.2f} {r.cpu_seconds:>7.1f} {r.peak_pss_mib:>9.0f} "
            f"{r.requests_per_reconcile:>8.1f} {r.cache_hits_per_reconcile:>8.1f} "
            f"{r.steady_runs:>11} {r.per_task_ms:>8.0f} "
            f"{p50_ratio:>5.1f}x {makespan_ratio:>9.1f}x  "
            f"{r.change_p50:>9.2f} {r.change_makespan:>14.2f} "
            f"{change_ratio:>8.1f}x {change_makespan_ratio:>13.1f}x  "
            f"{r.ready_seconds:>7.2f} {r.idle_pss_mib:>8.0f}"
        )


@dataclass
class Release:
    """The bench's results in one ansible-core release's environment."""

    minor: str
    ansible_core: str = ""
    python: str = ""
    results: list[Result] = field(default_factory=list)
    error: str = ""  # why there are no results at all


def run_in_release(minor: str, kubeconfig: Path, args: argparse.Namespace) -> Release:
    """This bench, with the same settings, in MINOR's environment."""
    release = Release(minor)
    made = subprocess.run(
        [sys.executable, str(ANSIBLE_ENV), minor, "--label", "bench"],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        release.error = f"scripts/ansible_env.py {minor} failed (see above)"
        return release
    python = made.stdout.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "results.json"
        child = subprocess.run(
            [
                python,
                __file__,
                f"--objects={args.objects}",
                f"--concurrency={args.concurrency}",
                f"--modes={args.modes}",
                f"--steady={args.steady}",
                f"--quiet={args.quiet}",
                f"--cpu-limit={args.cpu_limit}",
                f"--results-json={output}",
                *(["--gather-facts"] if args.gather_facts else []),
            ],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            check=False,
        )
        if not output.exists():
            release.error = f"the bench exited with {child.returncode} before its results"
            return release
        found = json.loads(output.read_text())
    release.ansible_core, release.python = found["ansible_core"], found["python"]
    release.results = [Result(**result) for result in found["results"]]
    return release


def report_releases(releases: list[Release], modes: list[str], limits: list[str]) -> None:
    """Per CPU limit, one table: one row per release and N, each mode's figures
    side by side, then the other modes' speed-up over `reference`."""
    for limit in limits:
        subset = [
            dataclasses.replace(
                release, results=[r for r in release.results if r.cpu_limit == limit]
            )
            for release in releases
        ]
        print(f"\n{limit_title(limit, [r for rel in subset for r in rel.results])}")
        report_releases_limit(subset, modes)


def report_releases_limit(releases: list[Release], modes: list[str]) -> None:
    others = [m for m in modes if m != "reference"] if "reference" in modes else []
    block = (
        f"{'p50 s':>7} {'makespan s':>10} {'CPU s':>7} {'peak MiB':>8} {'ms/task':>7} "
        f"{'ready s':>7} {'idle PSS':>8}"
    )
    ratio = f"{'p50 x':>6} {'makespan x':>10}"
    print(
        f"{'':<13} {'':<7} {'':>4}"
        + "".join(f"  {m:<{len(block)}}" for m in modes)
        + "".join(f"  {m + ' vs reference':<{len(ratio)}}" for m in others)
    )
    print(
        f"{'ansible-core':<13} {'Python':<7} {'N':>4}"
        + f"  {block}" * len(modes)
        + f"  {ratio}" * len(others)
    )
    failures = []
    for release in releases:
        name = release.ansible_core or release.minor
        if release.error:
            print(f"{name:<13} {'-':<7} {'-':>4}  failed: {release.error}")
            continue
        for count in dict.fromkeys(r.objects for r in release.results):
            by_mode = {r.mode: r for r in release.results if r.objects == count}
            cells = []
            for mode in modes:
                r = by_mode.get(mode)
                if r is None or r.error:
                    cells.append(
                        f"{'failed':>7} {'-':>10} {'-':>7} {'-':>8} {'-':>7} {'-':>7} {'-':>8}"
                    )
                    failures.append(f"{name} N={count} {mode}: {r.error if r else 'not run'}")
                else:
                    cells.append(
                        f"{r.p50:>7.2f} {r.makespan:>10.2f} {r.cpu_seconds:>7.1f} "
                        f"{r.peak_pss_mib:>8.0f} {r.per_task_ms:>7.0f} "
                        f"{r.ready_seconds:>7.2f} {r.idle_pss_mib:>8.0f}"
                    )
            base = by_mode.get("reference")
            for mode in others:
                r = by_mode.get(mode)
                if base and r and not base.error and not r.error:
                    cells.append(f"{base.p50 / r.p50:>5.1f}x {base.makespan / r.makespan:>9.1f}x")
                else:
                    cells.append(f"{'-':>6} {'-':>10}")
            print(f"{name:<13} {release.python:<7} {count:>4}" + "".join(f"  {c}" for c in cells))
    for failure in failures:
        print(f"  {failure}")


def measure_all(
    kubeconfig: Path, args: argparse.Namespace
) -> tuple[list[Result], tuple[int, float] | None]:
    """Every N in every mode (and tracing setting), in this environment; a mode
    that fails is reported and the others still run. With tracing, also what the
    spans of one reconcile cost in CPU (`tracing_cpu`)."""
    results = []
    tracings = [setting == "on" for setting in args.tracing.split(",")]
    with contextlib.ExitStack() as stack, config.new_client_from_config(str(kubeconfig)) as api:
        collector = stack.enter_context(started_collector()) if any(tracings) else None
        apply_manifests(api, HERE / "crd.yaml")
        for limit in args.cpu_limit.split(","):
            for count in (int(n) for n in args.objects.split(",")):
                for mode in args.modes.split(","):
                    for traced in tracings:
                        what = f"N={count} mode={mode} cpu-limit={limit} tracing={traced}"
                        print(f"{what} ...", file=sys.stderr)
                        try:
                            results.append(
                                measure(
                                    kubeconfig,
                                    api,
                                    mode,
                                    count,
                                    args.concurrency,
                                    args.steady,
                                    gather_facts=args.gather_facts,
                                    limit=limit,
                                    quiet=args.quiet,
                                    collector=collector if traced else None,
                                )
                            )
                        except BenchFailed as failure:
                            print(f"{what} failed: {failure}", file=sys.stderr)
                            results.append(
                                Result(
                                    mode, count, cpu_limit=limit, error=str(failure), tracing=traced
                                )
                            )
        cost = tracing_cpu(collector.endpoint) if collector is not None else None
    return results, cost


@contextlib.contextmanager
def started_collector() -> Iterator[Any]:
    """The OpenTelemetry Collector the traced operators send to (tools/otel-collector)."""
    sys.path.insert(0, str(TESTS))
    from go_tools import built
    from otel_collector import Collector

    with (
        tempfile.TemporaryDirectory(prefix="bench-collector-") as directory,
        Collector(built("otel-collector"), Path(directory)).start() as collector,
    ):
        print(f"collector listening at {collector.endpoint}", file=sys.stderr)
        yield collector


def tracings(text: str) -> str:
    """--tracing: a comma list of `off` and `on`, in the order to run them (repeats
    too: `off,on,off,on` alternates, and the overhead pools each setting's runs)."""
    settings = [part.strip().lower() for part in text.split(",") if part.strip()]
    if not settings or any(setting not in ("off", "on") for setting in settings):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma list of off and on")
    return ",".join(settings)


def cpu_limits(text: str) -> str:
    """--cpu-limit: a comma list of `none` or CPUs (> 0), normalised ("1.0" -> "1")."""
    limits = []
    for item in (part.strip() for part in text.split(",")):
        if item.lower() == "none":
            limits.append("none")
            continue
        try:
            cpus = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is neither `none` nor CPUs") from None
        if not 0.01 <= cpus < float("inf"):
            raise argparse.ArgumentTypeError(f"{item!r}: at least 0.01 CPUs")
        limits.append(f"{cpus:g}")
    return ",".join(dict.fromkeys(limits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", default="1,10,50", help="comma list of N")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--modes", default="reference,warm")
    parser.add_argument("--steady", type=float, default=60.0, help="seconds of quiet to watch")
    parser.add_argument(
        "--quiet",
        type=float,
        default=5.0,
        help="seconds with no run and nothing queued before the idle PSS is read",
    )
    parser.add_argument(
        "--cpu-limit",
        type=cpu_limits,
        default="none",
        metavar="LIMITS",
        help="comma list of CPU limits, each `none` or CPUs (e.g. none,1,0.5): a table per "
        "limit, the operator and its runs in a cgroup with that CPU quota (root only)",
    )
    parser.add_argument(
        "--ansible-core",
        help="comma list of ansible-core releases (2.18,2.19,2.20,2.21) to run in, each in "
        "its own environment; default: this environment",
    )
    parser.add_argument(
        "--gather-facts",
        action="store_true",
        help="gather facts in every run (default: ANSIBLE_GATHERING=explicit, as Operator "
        "SDK's scaffolded manager.yaml sets)",
    )
    parser.add_argument(
        "--tracing",
        type=tracings,
        default="off",
        help="comma list of off and on: each N and mode measured with OpenTelemetry traces "
        "off and on (sent to a real collector), and tracing's overhead reported",
    )
    parser.add_argument("--results-json", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ansible_core and args.tracing != "off":
        parser.error("--tracing compares in this environment: leave out --ansible-core")
    if any(limit != "none" for limit in args.cpu_limit.split(",")) and (
        reason := cpu_limit.unavailable_reason(limited=True)
    ):
        parser.error(f"--cpu-limit: {reason}")
    setting = (
        f"Memcached-style role (Deployment, Service, ConfigMap, status), "
        f"{args.concurrency} concurrent reconciles, {os.cpu_count()} CPUs, "
        f"facts {'gathered' if args.gather_facts else 'not gathered (ANSIBLE_GATHERING=explicit)'}"
    )
    with provide(progress=lambda m: print(m, file=sys.stderr)) as cluster:
        if args.ansible_core:
            releases = [
                run_in_release(minor.strip(), cluster.kubeconfig, args)
                for minor in args.ansible_core.split(",")
            ]
            print(f"\n{setting}, per ansible-core release")
            report_releases(releases, args.modes.split(","), args.cpu_limit.split(","))
            failed = any(r.error for release in releases for r in release.results) or any(
                release.error for release in releases
            )
            sys.exit(1 if failed else 0)
        results, cost = measure_all(cluster.kubeconfig, args)
    if args.results_json:
        args.results_json.write_text(
            json.dumps(
                {
                    "ansible_core": importlib.metadata.version("ansible-core"),
                    "python": platform.python_version(),
                    "results": [dataclasses.asdict(r) for r in results],
                }
            )
        )
    print(f"\n{setting}, ansible-core {importlib.metadata.version('ansible-core')}")
    report(results, args.quiet, cost)
    sys.exit(1 if any(r.error for r in results) else 0)


if __name__ == "__main__":
    main()
