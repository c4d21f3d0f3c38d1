"""Scale: N objects over M namespaces on one replica, the objects there before it starts.

    .venv/bin/python bench/scale.py [--objects 1000] [--namespaces 100] [--workers 4]
                                    [--cap 2] [--mode warm|reference]
                                    [--scope list|selector|all] [--changed] [--ready-only]
                                    [--edits 20] [--edits-only]
                                    [--memory-profile] [--tracemalloc FRAMES]

Creates M namespaces carrying this run's label and N objects of bench/operator's
Memcached-style kind spread over them (concurrently; creation rates reported),
then starts one operator over them: `--scope list` names the M namespaces in
WATCH_NAMESPACE, `selector` passes `--watch-namespace-selector` with the run's
label (an operator without that flag is reported as such), `all` watches every
namespace (on a shared cluster: other people's Memcacheds too).

Phase `present`: the operator's start -> /readyz 200 (`ready s`), then until
every object is Successful for its generation (`Successful s`, from the start;
`obj/s` is N over the time after ready, what the workers and the runs cap
allow). With `--changed`, phase `changed`: every object's spec patched at once,
until all are Successful for the new generation (`obj/s`: N over that time).
`--ready-only`: the start -> ready time and no reconciles (with `--objects 0`:
the cost of the namespaces alone).

Edits during the backlog (`--edits N`, 20 by default; 0: none): once ready,
while the start's list still queues nearly all N objects, N objects the
operator has not run yet (the last in the list's order: without priorities,
the last to run) are edited one after the other, each once the one before is
Successful; per edit, the seconds from the edit to its reconcile starting
(its `Reconciling` condition for the new generation, polled every 50 ms:
written as a worker takes it, before its run takes a run slot, which with
more workers than `--cap` may follow a run later) and to `Successful` for
it. The table's `edit p50` / `edit p99` are the first, over the N edits
(nearest rank: with 20, p99 is the slowest); a line under it gives both, each
edit's figures, and the queue's depth before the first edit and after the last.
`--edits-only`: stop after the edits (no wait for the whole backlog: 10,000
objects take about half an hour on two cores), `Successful s` and `lost` n/a.

Per phase: the operator's RSS at ready, idle (every object Successful, no run
in flight and nothing queued for `--quiet` seconds) and peak (sampled), the
whole process tree's peak PSS, the informer cache's size and bytes per cached
object (the `ansible_operator_cache_bytes` / `_objects` gauges; n/a when the
operator has none), the most runs in flight at once (the cap is `--cap`), API
requests per reconcile (the operator's own count, as bench/soak.py), the files
and bytes left in `--runner-dir`, and the objects lost (not Successful for
their generation at the deadline, or once none more was for `--stall` seconds:
the bench then exits non-zero). The namespaces are deleted at the end,
concurrently, waiting `--cleanup-timeout` seconds at most. Runs gather no
facts (ANSIBLE_GATHERING=explicit).

`--memory-profile`: once settled, the operator's live objects by type (counts and
bytes; taken by a thread of its own, bench/memory_profile/sitecustomize.py, so
nothing is traced before). `--tracemalloc FRAMES` adds its allocations by source
line and file, traced from its start (the RSS figures of such a run are inflated).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config
from prometheus_client.parser import text_string_to_metric_families

from ansible_operator.cluster import provide
from ansible_operator.runner import proctree
from ansible_operator.testing.manifests import apply_manifests
from ansible_operator.testing.operator import OperatorProcess
from reconcile import (
    GROUP,
    HERE,
    PLURAL,
    VERSION,
    _memory_mib,
    _successful,
    memcached,
    metrics_url,
)
from soak import _rss_mib

# On the namespaces and the objects: this run's, for the selector scope, one
# list call and the cleanup.
RUN_LABEL = "bench.ansible-operator.io/scale-run"
SELECTOR_FLAG = "--watch-namespace-selector"
MIB = 1024 * 1024
PROFILER = HERE.parent / "memory_profile"  # its sitecustomize answers profile requests


@dataclass
class Edit:
    """One edit during the backlog: seconds to its reconcile starting and to Successful."""

    to_run: float | None
    to_successful: float | None


def nearest_rank(values: list[float], percent: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


@dataclass
class Phase:
    """One phase's figures, a row of the table."""

    name: str
    objects: int
    seconds_to_ready: float | None = None  # the operator's start -> /readyz 200
    seconds_to_successful: float | None = None  # the phase's start -> every object Successful
    reconcile_seconds: float | None = None  # the part of it spent reconciling
    successful: int = 0
    most_runs: float = 0.0
    rss_ready_mib: float | None = None
    rss_idle_mib: float | None = None
    rss_peak_mib: float = 0.0
    pss_peak_mib: float = 0.0
    cache_bytes: float | None = None
    cache_objects: float | None = None
    requests: float = 0.0  # sent to the API server during the phase's reconciles
    runner_files: int = 0
    runner_bytes: int = 0
    edits: list[Edit] | None = None  # edited while the backlog was queued
    queued_before_edits: float | None = None
    queued_after_edits: float | None = None

    @property
    def lost(self) -> int:
        return self.objects - self.successful

    @property
    def objects_per_second(self) -> float | None:
        if not self.reconcile_seconds or not self.successful:
            return None
        return self.successful / self.reconcile_seconds


# ----- the operator's metrics ------------------------------------------------


def scrape(url: str) -> dict[str, float]:
    """Each sample name's sum over its series; a name the operator does not
    expose is absent (not 0)."""
    with urllib.request.urlopen(url, timeout=10) as page:
        text = page.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


class Sampler:
    """Samples the operator's RSS, its tree's PSS and its runs in flight and
    queue depth, in a thread, keeping the peaks since the last `reset`.

    /metrics is scraped every `scrape_every` seconds, not at each sample: its
    exposition grows with the objects (a `resource_created_at_seconds` series
    each), and at 10,000 objects scraping it twice a second took a third of
    the operator's CPU (py-spy), slowing the very reconciles being measured."""

    def __init__(self, pid: int, metrics: str, interval: float = 0.5, scrape_every: float = 0.5):
        self.pid, self.metrics, self.interval = pid, metrics, interval
        self.scrape_every = max(interval, scrape_every)
        self._scraped_at = 0.0
        self.rss_peak = self.pss_peak = self.most_runs = 0.0
        self.busy_at = time.monotonic()  # when a run or a queued key was last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> None:
        self.rss_peak = self.pss_peak = self.most_runs = 0.0

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.rss_peak = max(self.rss_peak, _rss_mib(self.pid))
                self.pss_peak = max(self.pss_peak, _memory_mib(proctree.tree(self.pid)))
                if time.monotonic() - self._scraped_at < self.scrape_every:
                    self._stop.wait(self.interval)
                    continue
                self._scraped_at = time.monotonic()
                figures = scrape(self.metrics)
                runs = figures.get("ansible_operator_runs_in_flight", 0.0)
                self.most_runs = max(self.most_runs, runs)
                if runs or figures.get("ansible_operator_queue_depth", 0.0):
                    self.busy_at = time.monotonic()
            self._stop.wait(self.interval)

    def wait_quiet(self, seconds: float, timeout: float) -> bool:
        """Until nothing ran nor waited for `seconds`, at least two scrapes
        (False: not within `timeout`)."""
        seconds = max(seconds, 2 * self.scrape_every)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if time.monotonic() - self.busy_at >= seconds:
                return True
            time.sleep(self.interval)
        return False


# ----- the cluster side -------------------------------------------------------


def concurrently(clients: int, calls: Iterable[Callable[[], Any]]) -> list[Any]:
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(lambda call: call(), calls))


def timed(what: str, count: int, work: Callable[[], Any]) -> Any:
    started = time.monotonic()
    result = work()
    seconds = time.monotonic() - started
    rate = f" ({count / seconds:.0f}/s)" if count and seconds else ""
    print(f"{what}: {count} in {seconds:.1f} s{rate}", file=sys.stderr)
    return result


def is_successful(item: dict[str, Any], generation: int | None = None) -> bool:
    """Successful for its generation (or for `generation` or a later one)."""
    status = item.get("status") or {}
    wanted = generation if generation is not None else item["metadata"]["generation"]
    return (status.get("observedGeneration") or 0) >= wanted and _successful(item) is not None


def count_successful(
    custom: client.CustomObjectsApi, selector: str, generations: dict[str, int] | None = None
) -> int:
    """This run's objects Successful for their generation (or for the one in
    `generations`, by namespace/name), from one list (the watch cache's)."""
    items = custom.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, label_selector=selector, resource_version="0"
    )["items"]
    wanted = generations or {}
    return sum(
        is_successful(
            item, wanted.get(f"{item['metadata']['namespace']}/{item['metadata']['name']}")
        )
        for item in items
    )


def wait_successful(
    custom: client.CustomObjectsApi,
    selector: str,
    objects: int,
    timeout: float,
    stall: float,
    generations: dict[str, int] | None = None,
) -> tuple[int, float]:
    """(objects Successful, when the last of them was seen) once every object
    is, after `timeout`, or after `stall` seconds without one more (an operator
    that stopped reconciling is reported, not waited on for the whole timeout).
    Polled less often the more objects there are."""
    interval = max(0.5, objects / 2000)
    now = time.monotonic()
    deadline, progressed_at, told_at = now + timeout, now, now
    done = 0
    while (now := time.monotonic()) < deadline and now - progressed_at < stall:
        count = count_successful(custom, selector, generations)
        if count > done:
            done, progressed_at = count, now
        if done >= objects:
            break
        if now - told_at >= 30:
            print(f"  {done}/{objects} Successful", file=sys.stderr)
            told_at = now
        time.sleep(interval)
    if done < objects and now - progressed_at >= stall:
        print(f"  no object became Successful in {stall:.0f} s: giving up", file=sys.stderr)
    return done, progressed_at


def runner_dir_usage(root: Path) -> tuple[int, int]:
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                size += (Path(folder) / name).lstat().st_size
                files += 1
    return files, size


def delete_namespaces(
    core: client.CoreV1Api, selector: str, names: list[str], clients: int, timeout: float
) -> None:
    """Delete them all at once, then wait for them to go, `timeout` at most:
    the namespace controller finishes whatever is left."""

    def delete(name: str) -> None:
        with contextlib.suppress(client.ApiException):
            core.delete_namespace(name)

    calls = [lambda name=name: delete(name) for name in names]
    timed("namespaces deleted", len(names), lambda: concurrently(clients, calls))
    deadline = time.monotonic() + timeout
    left = len(names)
    while left and time.monotonic() < deadline:
        time.sleep(2)
        left = len(core.list_namespace(label_selector=selector).items)
    if left:
        print(f"{left} namespaces still terminating after {timeout:.0f} s", file=sys.stderr)


# ----- the operator ---------------------------------------------------------------


def scope_settings(scope: str, run: str, namespaces: list[str]) -> tuple[list[str], dict[str, str]]:
    """The operator's arguments and environment for `scope`."""
    if scope == "list":
        return [], {"WATCH_NAMESPACE": ",".join(namespaces)}
    if scope == "selector":
        return [f"{SELECTOR_FLAG}={RUN_LABEL}={run}"], {}
    print("scope all: every namespace's Memcacheds are reconciled, not only ours", file=sys.stderr)
    return [], {}


def start_until_ready(operator: OperatorProcess, timeout: float) -> float:
    """Start the operator; seconds until its /readyz answers 200."""
    started = time.monotonic()
    operator.start(wait_ready=False)
    assert operator.process is not None
    deadline = started + timeout
    while time.monotonic() < deadline:
        if operator.process.poll() is not None:
            logs = operator.logs
            if "unrecognized arguments" in logs and SELECTOR_FLAG in logs:
                raise SystemExit(
                    f"this ansible-operator has no {SELECTOR_FLAG} flag: use --scope list or all"
                )
            code = operator.process.returncode
            raise SystemExit(f"the operator exited with {code}:\n{logs[-3000:]}")
        with contextlib.suppress(AssertionError, OSError, urllib.error.URLError):
            if operator.health("/readyz") == 200:
                return time.monotonic() - started
        time.sleep(0.05)
    raise SystemExit(f"the operator was not ready in {timeout:.0f} s; see {operator.log_path}")


def cache_figures(figures: dict[str, float]) -> tuple[float | None, float | None]:
    return (
        figures.get("ansible_operator_cache_bytes"),
        figures.get("ansible_operator_cache_objects"),
    )


def settle(phase: Phase, sampler: Sampler, args: argparse.Namespace, runner_root: Path) -> None:
    """The phase's figures once every run is over: idle RSS, cache, peaks, disk."""
    if not sampler.wait_quiet(args.quiet, timeout=120 + args.quiet):
        print(f"{phase.name}: still running or queued 120 s later", file=sys.stderr)
    with contextlib.suppress(OSError):
        phase.rss_idle_mib = _rss_mib(sampler.pid)
    phase.cache_bytes, phase.cache_objects = cache_figures(scrape(sampler.metrics))
    phase.rss_peak_mib, phase.pss_peak_mib = sampler.rss_peak, sampler.pss_peak
    phase.most_runs = sampler.most_runs
    phase.runner_files, phase.runner_bytes = runner_dir_usage(runner_root)


def run_phases(
    kubeconfig: Path,
    api: client.ApiClient,
    args: argparse.Namespace,
    run: str,
    namespaces: list[str],
    runner_root: Path,
) -> tuple[list[Phase], float]:
    """The phases on one operator; and the requests it sent before it was ready."""
    custom = client.CustomObjectsApi(api)
    selector = f"{RUN_LABEL}={run}"
    scope_args, scope_env = scope_settings(args.scope, run, namespaces)
    profile_dir = Path(tempfile.mkdtemp(prefix=f"ansible-operator-scale-{run}-profile-"))
    operator = OperatorProcess(
        HERE / "watches.yaml",
        kubeconfig,
        log_path=Path(f"/tmp/ansible-operator-scale-{run}.log"),
        args=[
            f"--max-concurrent-reconciles={args.workers}",
            f"--max-concurrent-runs={args.cap}",
            f"--runner-mode={args.mode}",
            f"--runner-dir={runner_root}",
            "--metrics-bind-address=127.0.0.1:0",
            *scope_args,
        ],
        env=scope_env | {"ANSIBLE_GATHERING": "explicit"} | profiler_env(args, profile_dir),
    )
    print(f"operator log: {operator.log_path}", file=sys.stderr)
    present = Phase("present", args.objects)
    phases = [present]
    try:
        present.seconds_to_ready = start_until_ready(operator, args.ready_timeout)
        ready_at = time.monotonic()
        assert operator.process is not None
        metrics = metrics_url(operator)
        startup = scrape(metrics)
        startup_requests = startup.get("ansible_operator_api_requests_total", 0.0)
        with contextlib.suppress(OSError):
            present.rss_ready_mib = _rss_mib(operator.process.pid)
        print(f"ready in {present.seconds_to_ready:.2f} s", file=sys.stderr)
        with Sampler(operator.process.pid, metrics, scrape_every=args.objects / 2000) as sampler:
            if args.ready_only:
                present.cache_bytes, present.cache_objects = cache_figures(startup)
                present.rss_peak_mib = present.rss_ready_mib or 0.0
                present.pss_peak_mib = _memory_mib(proctree.tree(operator.process.pid))
                return phases, startup_requests
            if args.edits:
                present.edits, present.queued_before_edits, present.queued_after_edits = (
                    edit_during_backlog(custom, selector, args, metrics)
                )
                if args.edits_only:
                    return phases, startup_requests
            timeout = args.timeout or 300 + args.objects * 10 / max(args.cap, 1)
            present.successful, done_at = wait_successful(
                custom, selector, args.objects, timeout, args.stall
            )
            present.reconcile_seconds = done_at - ready_at
            present.seconds_to_successful = present.seconds_to_ready + present.reconcile_seconds
            present.requests = scrape(metrics).get("ansible_operator_api_requests_total", 0.0)
            present.requests -= startup_requests
            settle(present, sampler, args, runner_root)
            if args.changed:
                sampler.reset()
                phases.append(change_all(custom, selector, args, sampler, runner_root))
            if args.memory_profile or args.tracemalloc:
                print(memory_profile(operator.process.pid, profile_dir))
    finally:
        operator.stop()
    return phases, startup_requests


def profiler_env(args: argparse.Namespace, folder: Path) -> dict[str, str]:
    """The environment under which the operator answers memory profile requests."""
    if not (args.memory_profile or args.tracemalloc):
        return {}
    paths = [str(PROFILER), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {"PYTHONPATH": os.pathsep.join(paths), "ANSIBLE_OPERATOR_MEMORY_PROFILE": str(folder)}
    if args.tracemalloc:
        env["ANSIBLE_OPERATOR_TRACEMALLOC"] = str(args.tracemalloc)
    return env


def memory_profile(pid: int, folder: Path, timeout: float = 600.0) -> str:
    """The settled operator's memory profile (bench/memory_profile/sitecustomize.py)."""
    (folder / f"{pid}.request").touch()
    answer = folder / f"{pid}.txt"
    deadline = time.monotonic() + timeout
    while not answer.exists():
        if time.monotonic() > deadline:
            return f"no memory profile from the operator in {timeout:.0f} s"
        time.sleep(1.0)
    return f"\nthe operator's memory, settled (pid {pid}):\n{answer.read_text()}"


def change_all(
    custom: client.CustomObjectsApi,
    selector: str,
    args: argparse.Namespace,
    sampler: Sampler,
    runner_root: Path,
) -> Phase:
    """Every object's spec changed at once, on the settled operator."""
    changed = Phase("changed", args.objects)
    requests_before = scrape(sampler.metrics).get("ansible_operator_api_requests_total", 0.0)
    items = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector)[
        "items"
    ]

    def patch(item: dict[str, Any]) -> tuple[str, int]:
        meta = item["metadata"]
        size = 4 + int(meta["name"].split("-")[-1]) % 3  # created with 1 + index % 3
        patched = custom.patch_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], {"spec": {"size": size}}
        )
        return f"{meta['namespace']}/{meta['name']}", patched["metadata"]["generation"]

    started = time.monotonic()
    calls = [lambda item=item: patch(item) for item in items]
    generations = dict(
        timed("objects patched", len(items), lambda: concurrently(args.clients, calls))
    )
    timeout = args.timeout or 300 + args.objects * 10 / max(args.cap, 1)
    changed.successful, done_at = wait_successful(
        custom, selector, args.objects, timeout, args.stall, generations
    )
    changed.seconds_to_successful = changed.reconcile_seconds = done_at - started
    changed.requests = (
        scrape(sampler.metrics).get("ansible_operator_api_requests_total", 0.0) - requests_before
    )
    settle(changed, sampler, args, runner_root)
    return changed


def _reconciling_for(item: dict[str, Any], generation: int) -> bool:
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "Reconciling" and (c.get("observedGeneration") or 0) >= generation
        for c in conditions
    )


def edit_one(
    custom: client.CustomObjectsApi, namespace: str, name: str, size: int, timeout: float
) -> Edit:
    """Edit one object; seconds until its reconcile started and until it is Successful for
    the edit (polled every 50 ms; None: not seen within `timeout`)."""
    started = time.monotonic()
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, {"spec": {"size": size}}
    )
    generation = patched["metadata"]["generation"]
    to_run = None
    while (now := time.monotonic()) - started < timeout:
        item = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        if to_run is None and _reconciling_for(item, generation):
            to_run = now - started
        if is_successful(item, generation):
            # A run too quick for the polls: it started before it was seen Successful.
            return Edit(to_run if to_run is not None else now - started, now - started)
        time.sleep(0.05)
    return Edit(to_run, None)


def edit_during_backlog(
    custom: client.CustomObjectsApi, selector: str, args: argparse.Namespace, metrics: str
) -> tuple[list[Edit], float, float]:
    """`args.edits` objects not run yet, the last in the list's order, edited one
    after the other; and the queue's depth before the first and after the last."""
    items = custom.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, label_selector=selector, resource_version="0"
    )["items"]
    order = sorted(
        items, key=lambda item: (item["metadata"]["namespace"], item["metadata"]["name"])
    )
    waiting = [item for item in order if not (item.get("status") or {}).get("conditions")]
    chosen = waiting[-args.edits :]
    before = scrape(metrics).get("ansible_operator_queue_depth", 0.0)
    edits = []
    for item in reversed(chosen):
        meta = item["metadata"]
        size = 7 + len(edits) % 3  # not a size it was created with (1 + index % 3)
        edits.append(edit_one(custom, meta["namespace"], meta["name"], size, args.edit_timeout))
    after = scrape(metrics).get("ansible_operator_queue_depth", 0.0)
    return edits, before, after


def report_edits(phase: Phase) -> None:
    if phase.edits is None:
        return
    runs = [e.to_run for e in phase.edits if e.to_run is not None]
    dones = [e.to_successful for e in phase.edits if e.to_successful is not None]
    missed = len(phase.edits) - len(dones)

    def pair(values: list[float]) -> str:
        p50, p99 = nearest_rank(values, 50), nearest_rank(values, 99)
        if p50 is None or p99 is None:
            return "n/a"
        return f"p50 {p50:.2f} s, p99 {p99:.2f} s, max {max(values):.2f} s"

    print(
        f"{phase.name}: {len(phase.edits)} edits while {phase.queued_before_edits:.0f} objects "
        f"were queued ({phase.queued_after_edits:.0f} after the last): edit -> its "
        f"reconcile started {pair(runs)}; edit -> Successful {pair(dones)}"
        + (f"; {missed} not Successful within --edit-timeout" if missed else "")
    )
    each = ", ".join(
        f"{_cell(e.to_run, '.2f', 0)}/{_cell(e.to_successful, '.2f', 0)}" for e in phase.edits
    )
    print(f"  each edit, to its reconcile / to Successful (s): {each}")


# ----- the report -------------------------------------------------------------------


def _cell(value: float | None, spec: str, width: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}{spec}}"


def report(phases: list[Phase], args: argparse.Namespace, startup_requests: float) -> None:
    print(
        f"\n{args.objects} objects over {args.namespaces} namespaces (scope {args.scope}), "
        f"{args.mode} mode, {args.workers} workers, at most {args.cap} runs at once, "
        f"{os.cpu_count()} CPUs; {startup_requests:.0f} API requests before ready"
    )
    header = (
        f"{'phase':<8} {'ready s':>7} {'Successful s':>12} {'obj/s':>6} {'lost':>5} "
        f"{'runs max':>8} {'RSS ready':>9} {'RSS idle':>8} {'RSS peak':>8} {'PSS peak':>8} "
        f"{'cache MiB':>9} {'B/object':>8} {'req/rec':>7} {'run files':>9} {'run MiB':>7} "
        f"{'edit p50':>8} {'edit p99':>8}"
    )
    print(header)
    for p in phases:
        per_object = (
            p.cache_bytes / p.cache_objects
            if p.cache_bytes is not None and p.cache_objects
            else None
        )
        to_run = [e.to_run for e in p.edits or [] if e.to_run is not None]
        unfinished = args.ready_only or (args.edits_only and p.name == "present")
        print(
            f"{p.name:<8} {_cell(p.seconds_to_ready, '.2f', 7)} "
            f"{_cell(p.seconds_to_successful, '.1f', 12)} {_cell(p.objects_per_second, '.2f', 6)} "
            f"{_cell(None if unfinished else p.lost, 'd', 5)} {p.most_runs:>8.0f} "
            f"{_cell(p.rss_ready_mib, '.0f', 9)} "
            f"{_cell(p.rss_idle_mib, '.0f', 8)} {p.rss_peak_mib:>8.0f} {p.pss_peak_mib:>8.0f} "
            f"{_cell(None if p.cache_bytes is None else p.cache_bytes / MIB, '.1f', 9)} "
            f"{_cell(per_object, '.0f', 8)} "
            f"{_cell(p.requests / p.successful if p.successful else None, '.1f', 7)} "
            f"{p.runner_files:>9} {p.runner_bytes / MIB:>7.1f} "
            f"{_cell(nearest_rank(to_run, 50), '.2f', 8)} "
            f"{_cell(nearest_rank(to_run, 99), '.2f', 8)}"
        )
    print(
        "(RSS and PSS in MiB; RSS idle: every object Successful and nothing run or queued "
        f"for {args.quiet:.0f} s; edit p50/p99: seconds from an edit to its reconcile starting, "
        "while the start's backlog was queued)"
    )
    for p in phases:
        report_edits(p)


# ----- main -------------------------------------------------------------------------


def api_client(kubeconfig: Path, clients: int) -> client.ApiClient:
    """A client whose connection pool serves `clients` threads at once."""
    configuration = client.Configuration()
    config.load_kube_config(str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = clients
    return client.ApiClient(configuration)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4, help="--max-concurrent-reconciles")
    parser.add_argument("--cap", type=int, default=2, help="--max-concurrent-runs")
    parser.add_argument("--mode", choices=("warm", "reference"), default="warm")
    parser.add_argument("--scope", choices=("list", "selector", "all"), default="list")
    parser.add_argument("--changed", action="store_true", help="then change every object")
    parser.add_argument("--ready-only", action="store_true", help="time to ready, no reconciles")
    parser.add_argument(
        "--edits", type=int, default=20, help="objects edited one by one during the backlog"
    )
    parser.add_argument(
        "--edits-only", action="store_true", help="stop after the edits (no wait for the backlog)"
    )
    parser.add_argument("--edit-timeout", type=float, default=120.0, help="seconds per edit")
    parser.add_argument("--clients", type=int, default=8, help="threads creating and deleting")
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds idle before RSS idle")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--timeout", type=float, help="seconds for a phase's reconciles")
    parser.add_argument(
        "--stall", type=float, default=180.0, help="seconds without progress before giving up"
    )
    parser.add_argument("--cleanup-timeout", type=float, default=120.0)
    parser.add_argument(
        "--memory-profile",
        action="store_true",
        help="once settled, print the operator's live objects by type (no cost before)",
    )
    parser.add_argument(
        "--tracemalloc",
        type=int,
        metavar="FRAMES",
        help="trace the operator's allocations from its start, and print them by source "
        "once settled (costs memory and time: its RSS figures are not the plain operator's)",
    )
    args = parser.parse_args()
    if args.namespaces < 1:
        parser.error("--namespaces must be at least 1")
    run = uuid.uuid4().hex[:6]
    selector = f"{RUN_LABEL}={run}"
    names = [f"scale-{run}-{index}" for index in range(args.namespaces)]
    runner_root = Path(tempfile.mkdtemp(prefix=f"ansible-operator-scale-{run}-runs-"))
    with (
        provide(progress=lambda m: print(m, file=sys.stderr)) as cluster,
        api_client(cluster.kubeconfig, args.clients) as api,
    ):
        apply_manifests(api, HERE / "crd.yaml")
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        labels = {RUN_LABEL: run}

        def create_namespace(name: str) -> None:
            core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
            )

        def create_object(index: int) -> None:
            body = memcached(f"m-{index}", index)
            body["metadata"]["labels"] = labels
            custom.create_namespaced_custom_object(
                GROUP, VERSION, names[index % len(names)], PLURAL, body
            )

        try:
            namespace_calls = [lambda name=name: create_namespace(name) for name in names]
            timed(
                "namespaces created",
                len(names),
                lambda: concurrently(args.clients, namespace_calls),
            )
            object_calls = [
                lambda index=index: create_object(index) for index in range(args.objects)
            ]
            timed("objects created", args.objects, lambda: concurrently(args.clients, object_calls))
            phases, startup_requests = run_phases(
                cluster.kubeconfig, api, args, run, names, runner_root
            )
        finally:
            delete_namespaces(core, selector, names, args.clients, args.cleanup_timeout)
            shutil.rmtree(runner_root, ignore_errors=True)
    report(phases, args, startup_requests)
    lost = [
        p
        for p in phases
        if p.lost and not args.ready_only and not (args.edits_only and p.name == "present")
    ]
    for p in lost:
        print(f"{p.name}: {p.lost} of {p.objects} objects not Successful for their generation")
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
