"""Where one reconcile's wall and CPU time go, for the bench operator's four-task role.

    .venv/bin/python bench/profile.py [--reconciles 10] [--modes warm,reference]
                                      [--disable-acceleration NAME] [--no-cpu] [--json FILE]

On the local control plane (or KUBECONFIG), per runner mode: start
`ansible-operator run` over bench/operator (with ANSIBLE_GATHERING=explicit,
as Operator SDK's scaffolded manager.yaml sets it), create one object, and
reconcile it K times in a row (patch spec.size, wait until the operator logs
the run's end). Then prints:

- WALL: the median over the K reconciles of each phase: the operator before
  the run (queue, run dir), the runner's start, ansible-playbook's start, each
  task and the gaps between them, the end. The run's job events (artifacts,
  `--runner-dir`) give the times inside the run; the operator's log lines,
  stamped here as they arrive, give its start and end.
- CPU: the same K reconciles again under `py-spy record --subprocesses`,
  samples sorted into processes and what they were doing
  (bench/profile_stacks.py), in ms per reconcile; and the CPU per reconcile
  of the operator and everything it started, measured exactly in the first
  pass from a cgroup v1 `cpuacct` group it runs in (root only), and each
  process's own share of it: every process a run starts (ansible-runner,
  ansible-playbook, each task's worker, each module, the warm runner's forks
  alike) records its exact CPU time when it ends (bench/exit_cpu, put on the
  operator's PYTHONPATH).

py-spy is installed on demand into ~/.cache/ansible-operator/venvs/py-spy.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client, config

from ansible_operator.cluster import provide
from ansible_operator.testing.manifests import apply_manifests
from profile_stacks import OTHER, PROCESSES, UNATTRIBUTED, Profile, read_profile
from reconcile import GROUP, HERE, PLURAL, VERSION, memcached

EXIT_CPU = Path(__file__).resolve().parent / "exit_cpu"  # its sitecustomize records
VENVS = Path.home() / ".cache" / "ansible-operator" / "venvs"
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
SAMPLE_RATE = 100  # py-spy samples a second: one sample is 10 ms of a thread on CPU
WARM_UP = 2  # reconciles before the measured ones (caches, first-run imports)
# A run's writes to its dependents re-queue the object (as in Operator SDK):
# the next change waits until no run started for this long.
QUIET = 1.0
IDLE = 3.0  # seconds of the operator's idle CPU measured, to tell it apart
RUN_TIMEOUT = 120.0
OBJECT = "m-0"


class BenchFailed(Exception):
    """One mode gave no figures; the others still run."""


def say(message: str) -> None:
    print(message, file=sys.stderr)


# ----- the operator, its log lines stamped as they arrive ----------------------------


@dataclass(frozen=True)
class LogLine:
    at: float  # time.time() when it reached us
    text: str


class Operator:
    """`ansible-operator run` in its own session (and cpuacct group, if any),
    its log read through a pipe so each line's arrival time is known to a few
    ms (the log's own stamps have whole seconds)."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.lines: list[LogLine] = []
        self.log_path = log_path
        self._changed = threading.Condition()
        self._args, self._env = args, env
        self.process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    def start(self, group: CpuGroup | None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ansible_operator.cli", "run", *self._args],
            cwd=HERE,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=group.join if group else None,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for(r"operator started", after=0, timeout=60)

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        with self.log_path.open("w") as log:
            for raw in self.process.stdout:
                line = LogLine(time.time(), raw.decode(errors="replace").rstrip("\n"))
                log.write(line.text + "\n")
                log.flush()
                with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, pattern: str, *, after: int, timeout: float) -> tuple[int, LogLine]:
        """The first line from index `after` on that matches: (index, line)."""
        found = self.next_match(pattern, after=after, timeout=timeout)
        if found is None:
            raise BenchFailed(f"no log line {pattern!r} in {timeout:.0f}s; see {self.log_path}")
        return found

    def next_match(self, pattern: str, *, after: int, timeout: float) -> tuple[int, LogLine] | None:
        """Like wait_for, None when no such line came in `timeout` s."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            index = after
            while True:
                while index < len(self.lines):
                    if compiled.search(self.lines[index].text):
                        return index, self.lines[index]
                    index += 1
                assert self.process is not None
                if self.process.poll() is not None and not (
                    self._reader and self._reader.is_alive()
                ):
                    last = self.lines[-1].text if self.lines else ""
                    raise BenchFailed(
                        f"the operator exited with {self.process.returncode} before logging "
                        f"{pattern!r} ({last}); see {self.log_path}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(min(left, 1.0))

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(40)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self._reader:
            self._reader.join(5)


class CpuGroup:
    """A cgroup v1 cpuacct group: the CPU of every process ever in it, however
    short-lived (a module's interpreter), in ns. The operator's own run groups
    are in other hierarchies (freezer, pids, memory, v2), so its runs stay here."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def make(cls) -> tuple[CpuGroup | None, str]:
        """(the group, or None and why not)."""
        if not (CPUACCT / "cpuacct.usage").is_file():
            return None, f"no cgroup v1 cpuacct hierarchy at {CPUACCT}"
        if os.geteuid() != 0:
            return None, "not root (cannot make a cpuacct group)"
        path = CPUACCT / f"ansible-operator-profile-{os.getpid()}"
        try:
            path.mkdir(exist_ok=True)
        except OSError as error:
            return None, f"cannot make {path}: {error}"
        return cls(path), ""

    def join(self) -> None:
        """In the operator's process, before it execs (preexec_fn)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def usage_ns(self) -> int:
        return int((self.path / "cpuacct.usage").read_text())

    def remove(self) -> None:
        # Its processes are gone once the operator's session was killed; a
        # straggler keeps the group (rmdir fails), which is harmless.
        for _ in range(20):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.25)


# ----- one reconcile's timeline -------------------------------------------------------


@dataclass
class Run:
    """One reconcile: when the object changed, when the run started and ended
    (as the operator logged them), and the run's job events."""

    changed: float
    started: float
    ended: float
    duration: float  # the operator's own `duration=`
    events: list[dict]
    follow_ups: int = 0  # runs started after it by its own writes, before all was quiet


def job_events(artifacts: Path) -> list[dict]:
    found = []
    for path in (artifacts / "job_events").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            found.append(json.loads(path.read_text()))
    return sorted(found, key=lambda event: event.get("counter", 0))


def event_time(event: dict) -> float:
    created = datetime.datetime.fromisoformat(event["created"])
    if created.tzinfo is None:  # ansible-runner writes UTC
        created = created.replace(tzinfo=datetime.UTC)
    return created.timestamp()


def phases(run: Run) -> list[tuple[str, float]]:
    """(phase, seconds) in order; together they cover change -> run end.
    Rows starting with "  " split the row above and are not part of the sum."""
    events = run.events
    if not events:
        raise BenchFailed("the run left no job events (is --runner-dir kept?)")

    def first(kind: str, after: int = 0) -> tuple[int, dict]:
        for index in range(after, len(events)):
            if events[index]["event"] == kind:
                return index, events[index]
        raise BenchFailed(f"the run has no {kind} event after event {after}")

    _, playbook_start = first("playbook_on_start")
    play_index, play_start = first("playbook_on_play_start")
    _, stats = first("playbook_on_stats")
    first_event = event_time(events[0])
    rows = [
        ("operator before the run (queue, run dir)", run.started - run.changed),
        ("runner start (fork, ansible-runner, pty -> first event)", first_event - run.started),
        (
            "ansible-playbook start (CLI, inventory, playbook, callbacks)",
            event_time(play_start) - first_event,
        ),
        (
            "  first event -> playbook_on_start (CLI, inventory, playbook load)",
            event_time(playbook_start) - first_event,
        ),
        (
            "  playbook_on_start -> play start",
            event_time(play_start) - event_time(playbook_start),
        ),
    ]
    previous_end = event_time(play_start)
    task_starts = [
        index
        for index, event in enumerate(events)
        if event["event"] == "playbook_on_task_start" and index > play_index
    ]
    for number, index in enumerate(task_starts, 1):
        task_start = events[index]
        task = task_start["event_data"].get("task", "?")
        end = next(
            (
                event
                for event in events[index + 1 :]
                if event["event"] in ("runner_on_ok", "runner_on_failed", "runner_on_skipped")
                and event["event_data"].get("task_uuid")
                == task_start["event_data"].get("task_uuid")
            ),
            None,
        )
        if end is None:
            raise BenchFailed(f"task {task!r} has no result event")
        if end["event"] == "runner_on_failed":
            raise BenchFailed(f"task {task!r} failed")
        before = "play start" if number == 1 else f"task {number - 1} end"
        rows.append(
            (f"gap: {before} -> task {number} start", event_time(task_start) - previous_end)
        )
        rows.append((f"task {number}: {task}", event_time(end) - event_time(task_start)))
        previous_end = event_time(end)
    rows.append(("gap: last task end -> playbook_on_stats", event_time(stats) - previous_end))
    rows.append(("end (playbook_on_stats -> run end logged)", run.ended - event_time(stats)))
    return rows


RUN_START = r"run started .*name={name} run=(\S+)"
RUN_END = r"run (succeeded|failed) .* run={ident} "


def reconcile_once(
    operator: Operator, custom: client.CustomObjectsApi, namespace: str, size: int
) -> Run:
    """Patch spec.size, wait for the run it starts to end, then for the runs
    that run's own writes start (its dependents changed) until all is quiet."""
    mark = len(operator.lines)
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, OBJECT, {"spec": {"size": size}}
    )
    # The object changed at the latest when the API server answered.
    changed = time.time()
    index, started, ended = _one_run(operator, after=mark)
    fields = re.search(r"duration=([\d.]+)s .*artifacts=(\S+)", ended.text)
    if not fields:
        raise BenchFailed(f"unexpected run end line: {ended.text}")
    follow_ups = until_quiet(operator, after=index + 1)
    return Run(
        changed=changed,
        started=started.at,
        ended=ended.at,
        duration=float(fields.group(1)),
        events=job_events(Path(fields.group(2))),
        follow_ups=follow_ups,
    )


def until_quiet(operator: Operator, *, after: int) -> int:
    """Wait until no run of the object started for QUIET s; how many did."""
    runs = 0
    while operator.next_match(RUN_START.format(name=OBJECT), after=after, timeout=QUIET):
        index, _, _ = _one_run(operator, after=after)
        after = index + 1
        runs += 1
    return runs


def _one_run(operator: Operator, *, after: int) -> tuple[int, LogLine, LogLine]:
    """The next run of the object from log line `after` on: (index of its end
    line, its start line, its end line)."""
    index, started = operator.wait_for(
        RUN_START.format(name=OBJECT), after=after, timeout=RUN_TIMEOUT
    )
    ident = re.search(r"run=(\S+)", started.text)
    assert ident is not None
    index, ended = operator.wait_for(
        RUN_END.format(ident=re.escape(ident.group(1))), after=index, timeout=RUN_TIMEOUT
    )
    if " run failed " in ended.text:
        raise BenchFailed(f"the run failed: {ended.text}; see {operator.log_path}")
    return index, started, ended


# ----- py-spy -------------------------------------------------------------------------


def py_spy(say: Callable[[str], None]) -> Path:
    """py-spy in its own environment, made on first use."""
    venv = VENVS / "py-spy"
    binary = venv / "bin" / "py-spy"
    if binary.is_file():
        return binary
    say(f"installing py-spy into {venv}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "py-spy"],
        stdout=sys.stderr,
        check=True,
    )
    return binary


@contextlib.contextmanager
def recording(binary: Path, pid: int, output: Path, seconds: int) -> Iterator[None]:
    """py-spy records the operator and its descendants while the block runs."""
    log = output.with_suffix(".py-spy.log")
    with log.open("w") as errors:
        spy = subprocess.Popen(
            [
                str(binary),
                "record",
                "-p",
                str(pid),
                "--subprocesses",
                "-r",
                str(SAMPLE_RATE),
                "-f",
                "raw",
                "-o",
                str(output),
                "-d",
                str(seconds),
            ],
            stdout=errors,
            stderr=subprocess.STDOUT,
        )
    try:
        time.sleep(2)  # attached to the operator and its helpers before the first change
        if spy.poll() is not None:
            raise BenchFailed(f"py-spy exited with {spy.returncode}; see {log}")
        yield
    finally:
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)  # stop now: py-spy writes what it has
            try:
                spy.wait(60)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
    if not output.is_file():
        raise BenchFailed(f"py-spy wrote no {output}; see {log}")


# ----- one mode -------------------------------------------------------------------------


@dataclass
class ModeResult:
    mode: str
    runs: list[list[tuple[str, float]]] = field(default_factory=list)  # phases per change
    durations: list[float] = field(default_factory=list)  # the operator's duration=
    totals: list[float] = field(default_factory=list)  # change -> run end
    follow_ups: int = 0  # runs the measured runs' own writes started
    cpu_runs: int = 0  # runs while the cgroup's CPU was measured
    cpu_exact_ms: float | None = None  # per run
    cpu_idle_ms_per_s: float | None = None  # the same group with nothing to do
    cpu_not_measured: str = ""
    # kind of process -> (processes, their own CPU in ms), ended while the cgroup measured
    exit_cpu: dict[str, tuple[int, float]] = field(default_factory=dict)
    profile: Profile | None = None
    profile_runs: int = 0
    profile_file: str = ""
    error: str = ""

    def medians(self) -> dict[str, float]:
        names = [name for name, _ in self.runs[0]] if self.runs else []
        return {
            name: statistics.median(dict(run).get(name, 0.0) for run in self.runs) for name in names
        }


def measure(
    kubeconfig: Path, api: client.ApiClient, mode: str, args: argparse.Namespace, work: Path
) -> ModeResult:
    result = ModeResult(mode)
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    namespace = f"profile-{mode}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    operator_args = [
        f"--watches-file={HERE / 'watches.yaml'}",
        f"--runner-dir={work / f'runner-{mode}'}",
        f"--runner-mode={mode}",
        "--max-concurrent-reconciles=1",
        "--health-probe-bind-address=127.0.0.1:0",
        "--metrics-bind-address=0",
        "--proxy-port=0",
    ]
    if args.disable_acceleration:
        operator_args.append(f"--disable-acceleration={args.disable_acceleration}")
    exit_records = work / f"exit-cpu-{mode}.jsonl"
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "WATCH_NAMESPACE": namespace,
        "ANSIBLE_GATHERING": "explicit",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(EXIT_CPU), os.environ.get("PYTHONPATH")])),
        "ANSIBLE_OPERATOR_BENCH_EXIT_CPU": str(exit_records),
    }
    log_path = Path(tempfile.gettempdir()) / f"ansible-operator-profile-{namespace}.log"
    operator = Operator(operator_args, env, log_path)
    group, result.cpu_not_measured = CpuGroup.make()
    sizes = iter(range(1_000_000))

    def change() -> Run:
        # 2, 3, 2, ...: each differs from the one before (the object starts at 1).
        return reconcile_once(operator, custom, namespace, 2 + next(sizes) % 2)

    try:
        operator.start(group)
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, memcached(OBJECT, 0)
        )
        until_quiet(operator, after=0)
        for _ in range(WARM_UP):
            change()
        if group:
            before = group.usage_ns()
            time.sleep(IDLE)
            result.cpu_idle_ms_per_s = (group.usage_ns() - before) / 1e6 / IDLE
        before = group.usage_ns() if group else 0
        window_start = time.time()
        for number in range(args.reconciles):
            run = change()
            result.runs.append(phases(run))
            result.durations.append(run.duration)
            result.totals.append(run.ended - run.changed)
            result.follow_ups += run.follow_ups
            say(f"  {mode} change {number + 1}: {run.ended - run.changed:.3f}s to the run's end")
        result.cpu_runs = args.reconciles + result.follow_ups
        if group:
            result.cpu_exact_ms = (group.usage_ns() - before) / 1e6 / result.cpu_runs
        result.exit_cpu = exit_cpu(exit_records, window_start, time.time())
        if not args.no_cpu:
            assert operator.process is not None
            output = log_path.with_suffix(".raw")  # kept, beside the operator's log
            seconds = int(args.reconciles * 3 * RUN_TIMEOUT)  # an upper bound; stopped sooner
            with recording(py_spy(say), operator.process.pid, output, seconds):
                result.profile_runs = sum(1 + change().follow_ups for _ in range(args.reconciles))
            result.profile = read_profile(output)
            result.profile_file = str(output)
    except BenchFailed as failure:
        result.error = str(failure)
    finally:
        operator.stop()
        if group:
            group.remove()
        core.delete_namespace(namespace)
    return result


def process_kind(record: dict) -> str:
    """Which of a run's processes a record of bench/exit_cpu is from: a fork by
    the functions on its stack when it ended, an exec'd process by its program."""
    stack = record.get("stack", [])
    if "_end_session" in stack:
        return "module session (the run's fork of the module interpreter)"
    if "_run_child" in stack or record.get("ansiballz"):
        return "module"
    if "_launch" in stack:  # multiprocessing's fork: Ansible's WorkerProcess
        return "task worker"
    if "_playbook_here" in stack or Path(record.get("argv0", "")).name == "ansible-playbook":
        return "ansible-playbook"
    if "_runner" in stack or "ansible_runner" in record.get("argv0", ""):
        return "ansible-runner"
    if "prebuild" in stack:
        return "payload prebuild"
    return f"other ({Path(record.get('argv0', '')).name or '?'})"


def exit_cpu(path: Path, start: float, end: float) -> dict[str, tuple[int, float]]:
    """(processes, CPU ms) per kind, of the processes that ended in [start, end]."""
    last: dict[int, dict] = {}  # a fork that runs its atexit handlers, then os._exit: two lines
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if start <= record["ended"] <= end:
                    last[record["pid"]] = record
    kinds: dict[str, tuple[int, float]] = {}
    for record in last.values():
        kind = process_kind(record)
        count, total = kinds.get(kind, (0, 0.0))
        kinds[kind] = (count + 1, total + record["cpu_ms"])
    return kinds


# ----- output --------------------------------------------------------------------------


def _cell(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.0f}"


def report_wall(results: list[ModeResult], reconciles: int) -> None:
    if not results:
        return
    width = max(10, *(len(r.mode) + 2 for r in results))
    print(
        f"\nWALL: one reconcile (patch spec.size -> the operator logs the run's end), "
        f"median of {reconciles}, ms"
    )
    names: list[str] = []
    for r in results:
        for name in r.medians():
            if name not in names:
                names.append(name)
    label = max(len(n) for n in names) if names else 40
    print(f"| {'phase':<{label}} |" + "".join(f" {r.mode:>{width}} |" for r in results))
    print(f"|{'-' * (label + 2)}|" + "".join(f"{'-' * (width + 1)}:|" for _ in results))
    medians = [r.medians() for r in results]
    for name in names:
        cells = "".join(
            f" {_cell(m[name] * 1000 if name in m else None, width)} |" for m in medians
        )
        print(f"| {name:<{label}} |{cells}")
    summary = [
        (
            "sum of the phases' medians",
            [sum(v for n, v in m.items() if not n.startswith("  ")) for m in medians],
        ),
        (
            "median total (change -> run end)",
            [statistics.median(r.totals) if r.totals else None for r in results],
        ),
        (
            "median run duration= (operator's log)",
            [statistics.median(r.durations) if r.durations else None for r in results],
        ),
    ]
    for name, values in summary:
        cells = "".join(f" {_cell(v * 1000 if v is not None else None, width)} |" for v in values)
        print(f"| {name:<{label}} |{cells}")
    for r in results:
        if r.follow_ups:
            print(
                f"  {r.mode}: the {len(r.runs)} changes' runs started {r.follow_ups} more run(s) "
                "by their own writes to the object's dependents (not in this table)"
            )


def report_cpu(results: list[ModeResult]) -> None:
    if not results:
        return
    width = max(10, *(len(r.mode) + 2 for r in results))
    sampled = any(r.profile for r in results)
    print(
        "\nCPU: ms per run (a change's run and the runs its writes start alike)"
        + (
            f", sampled by py-spy at {SAMPLE_RATE}/s in every thread of the operator and its "
            "descendants (a thread waiting in a system call left out) in a second pass of as "
            "many changes"
            if sampled
            else ""
        )
    )

    def per_run(r: ModeResult, process: str = "", activity: str = "") -> float | None:
        """ms per run of the samples of `process` doing `activity` (""; any)."""
        if r.profile is None:
            return None
        samples = sum(
            n
            for (p, a), n in r.profile.by_activity.items()
            if process in ("", p) and activity in ("", a)
        )
        return samples * 1000 / SAMPLE_RATE / r.profile_runs

    rows: list[tuple[str, list[float | None]]] = []
    for process in (*PROCESSES, UNATTRIBUTED):
        seen: dict[str, int] = {}
        for r in results:
            for (p, activity), n in (r.profile.by_activity if r.profile else {}).items():
                if p == process:
                    seen[activity] = max(seen.get(activity, 0), n)
        if not seen:
            continue
        rows.append((process, [per_run(r, process) for r in results]))
        for activity in sorted(seen, key=lambda a: (a == OTHER, -seen[a])):
            rows.append(
                (
                    f"  {activity}",
                    [per_run(r, process, activity) for r in results],
                )
            )
    if sampled:
        rows.append(("sampled total", [per_run(r) for r in results]))
        rows.append(
            (
                "(waiting in a system call: left out)",
                [
                    r.profile.blocked * 1000 / SAMPLE_RATE / r.profile_runs if r.profile else None
                    for r in results
                ],
            )
        )
    kinds = sorted({kind for r in results for kind in r.exit_cpu})
    if kinds:
        rows.append(("each process's own, as it ended (first pass)", [None] * len(results)))
        for kind in kinds:
            rows.append(
                (
                    f"  {kind}",
                    [
                        r.exit_cpu[kind][1] / r.cpu_runs if kind in r.exit_cpu else None
                        for r in results
                    ],
                )
            )
        own = [sum(t for _, t in r.exit_cpu.values()) / r.cpu_runs for r in results]
        rows.append(("  sum of the run's processes", own))
        rows.append(
            (
                "  the rest: operator, warm processes, kernel (forks' exits)",
                [
                    r.cpu_exact_ms - o if r.cpu_exact_ms is not None else None
                    for r, o in zip(results, own, strict=True)
                ],
            )
        )
    rows.append(("measured total (cgroup cpuacct, first pass)", [r.cpu_exact_ms for r in results]))
    label = max(len(name) for name, _ in rows)
    print(
        f"| {'process / activity':<{label}} |" + "".join(f" {r.mode:>{width}} |" for r in results)
    )
    print(f"|{'-' * (label + 2)}|" + "".join(f"{'-' * (width + 1)}:|" for _ in results))
    for name, values in rows:
        print(f"| {name:<{label}} |" + "".join(f" {_cell(v, width)} |" for v in values))
    for r in results:
        if r.cpu_exact_ms is None:
            print(f"  {r.mode}: measured total: not measured ({r.cpu_not_measured})")
        else:
            changes = len(r.runs)
            print(
                f"  {r.mode}: measured over {changes} changes, {r.cpu_runs} runs "
                f"({r.cpu_exact_ms * r.cpu_runs / changes:.0f} ms per change), with "
                f"{QUIET:.0f} s of quiet after each; idle, the same processes use "
                f"{r.cpu_idle_ms_per_s:.1f} ms/s"
            )
        if r.exit_cpu:
            counts = ", ".join(
                f"{kind.split(' (')[0]} {count / r.cpu_runs:.1f}"
                for kind, (count, _) in sorted(r.exit_cpu.items())
            )
            print(f"  {r.mode}: processes per run: {counts}")
        if r.profile_file:
            print(f"  {r.mode}: py-spy's stacks ({r.profile_runs} runs): {r.profile_file}")
        sampled_total = per_run(r)
        if sampled_total and r.cpu_exact_ms and sampled_total > 1.2 * r.cpu_exact_ms:
            # py-spy tells a thread's state, not whether it had a CPU: a runnable
            # thread waiting for one (py-spy itself takes one) counts as running.
            print(
                f"  {r.mode}: sampled {sampled_total / r.cpu_exact_ms:.1f}x the measured total: "
                "threads waiting for a CPU were counted; read the sampled rows as shares"
            )


def as_json(results: list[ModeResult], settings: dict) -> dict:
    modes = {}
    for r in results:
        profile = r.profile
        modes[r.mode] = {
            "error": r.error,
            "wall_ms_median": {name: value * 1000 for name, value in r.medians().items()},
            "wall_ms_per_change": [{name: value * 1000 for name, value in run} for run in r.runs],
            "total_ms": [t * 1000 for t in r.totals],
            "duration_ms": [d * 1000 for d in r.durations],
            "follow_up_runs": r.follow_ups,
            "cpu_runs": r.cpu_runs,
            "cpu_idle_ms_per_s": r.cpu_idle_ms_per_s,
            "profile_runs": r.profile_runs,
            "cpu_measured_ms_per_run": r.cpu_exact_ms,
            "cpu_not_measured": r.cpu_not_measured if r.cpu_exact_ms is None else "",
            "cpu_own_ms_per_run": {
                kind: {"processes": count / r.cpu_runs, "ms": total / r.cpu_runs}
                for kind, (count, total) in sorted(r.exit_cpu.items())
            },
            "cpu_sampled_ms_per_run": {
                f"{process}/{activity}": n * 1000 / SAMPLE_RATE / r.profile_runs
                for (process, activity), n in sorted(profile.by_activity.items())
            }
            if profile
            else None,
            "samples": profile.total if profile else None,
            "samples_waiting": profile.blocked if profile else None,
            "py_spy_file": r.profile_file,
        }
    return {"settings": settings, "modes": modes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="warm", help="comma list of warm, reference")
    parser.add_argument("--reconciles", type=int, default=10, help="K reconciles per mode")
    parser.add_argument(
        "--disable-acceleration",
        metavar="NAME[,NAME]",
        help="passed to the operator: measure without this warm-runner acceleration",
    )
    parser.add_argument("--no-cpu", action="store_true", help="skip the py-spy pass")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.reconciles < 1:
        parser.error("--reconciles must be at least 1")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.no_cpu:
        py_spy(say)  # before the cluster: a failed install costs nothing
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="ansible-operator-profile-") as tmp,
        provide(progress=say) as cluster,
        config.new_client_from_config(str(cluster.kubeconfig)) as api,
    ):
        apply_manifests(api, HERE / "crd.yaml")
        for mode in modes:
            say(f"mode={mode} ...")
            results.append(measure(cluster.kubeconfig, api, mode, args, Path(tmp)))
        settings = {
            "role": "bench/operator (4 kubernetes.core tasks)",
            "reconciles": args.reconciles,
            "disable_acceleration": args.disable_acceleration or "",
            "ansible_core": importlib.metadata.version("ansible-core"),
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "ANSIBLE_GATHERING": "explicit",
        }
        print(
            f"\nbench/operator's Memcached role (4 kubernetes.core tasks), one object, "
            f"ansible-core {settings['ansible_core']}, Python {settings['python']}, "
            f"{os.cpu_count()} CPUs; the operator runs with ANSIBLE_GATHERING=explicit "
            "(as Operator SDK's scaffolded manager.yaml sets it)"
            + (
                f"; --disable-acceleration={args.disable_acceleration}"
                if args.disable_acceleration
                else ""
            )
        )
        report_wall([r for r in results if not r.error], args.reconciles)
        report_cpu([r for r in results if not r.error])
        for r in results:
            if r.error:
                print(f"  {r.mode}: failed: {r.error}")
        if args.json:
            args.json.write_text(json.dumps(as_json(results, settings), indent=1) + "\n")
    sys.exit(1 if any(r.error for r in results) else 0)


if __name__ == "__main__":
    main()
