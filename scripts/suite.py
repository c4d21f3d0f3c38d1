"""The whole suite, as `./dev test` runs it (after setting up .venv and linting): the
tiers of tests/ in the default environment, then the tests that depend on the
ansible-core release in an environment of each other supported release, every
stage a pytest run of its own, run LANES at a time.

    python scripts/suite.py [--lanes N] [--only STAGE,...] [--list]

STAGE is a tier (unit, processes, ...) or another release (2.18, 2.19, 2.20).

Most of a stage's time is waiting (for an API server, a run, a Lease, a Pod), so
stages share the machine: each starts when a lane is free and what it needs is
there (its environment set up; the node, which one stage at a time uses), the
longest first. A stage's output is printed whole when it ends, with its time and
the CPU its processes used; then the summary. A stage fails when a test fails or
none passed (pytest succeeds when every test was skipped).

Meanwhile, in the background: what the tiers need and a fresh machine builds for
minutes (scripts/prebuild.py: the control plane, the Go tools, the node's images; a
stage that needs one waits for it under the same lock), and the other releases'
environments (scripts/ansible_env.py), one after the other.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / os.environ.get("VENV", ".venv") / "bin" / "python"

# The tiers of the suite: each directory of tests/ that holds tests
# (docs/architecture.md, "Tests, in tiers"), each its own stage.
TIERS = ("unit", "processes", "integration", "security", "faults", "sharding", "node", "e2e")
TIERS += ("packaging",)

# The other supported ansible-core releases, each on the oldest Python it supports,
# with the tests that really run Ansible there: the oldest gets the unit tests, the
# tests that start Ansible (tests/processes) and the runner's integration tests; the
# templating exploit tests (issue 18), the variable-name and vault attacks (issue 25),
# what each release's loader reads of cluster data, attacked and generated (issue 39),
# the task-inline compatibility suite (issue 26) and the accelerations' suites run on
# every release.
TEMPLATING = (
    "tests/security/test_cluster_data_templating.py",
    "tests/security/test_variable_name_attacks.py",
    "tests/security/test_extravars_attacks.py",
)
EVERY_RELEASE = (
    *TEMPLATING,
    *(
        f"tests/processes/{name}.py"
        for name in (
            "test_task_inline",
            "test_cluster_data_generated",
            "test_ansible_names",
            "test_accelerations",
            "test_acceleration_probes",
            "test_settings_read_once",
            "test_local_tmp",
            "test_module_handoff",
            "test_module_server",
        )
    ),
)
OLDEST = (
    "tests/unit",
    "tests/processes",
    "tests/integration/test_runtime.py",
    "tests/integration/test_util_modules.py",
    "tests/integration/test_osdk_project.py",
    *TEMPLATING,
)
OTHER_RELEASES = {
    "2.18": ("unit, runner integration and templating tests", OLDEST),
    "2.19": ("exploit tests and task-inline compatibility", EVERY_RELEASE),
    "2.20": ("exploit tests and task-inline compatibility", EVERY_RELEASE),
}

# Minutes each stage took alone on CI's machine (its last sequential run): the longest
# start first, so that the last to end is a short one. Only the order depends on these.
EXPECTED_MINUTES = {
    "integration": 5.5,
    "node": 4.5,
    "2.18": 4,
    "faults": 3.4,
    "e2e": 3.4,
    "security": 3.3,
    "processes": 3.2,
    "sharding": 2.6,
    "2.20": 1.9,
    "2.19": 1.8,
    "packaging": 1,
    "unit": 0.6,
}
# Stages that use a resource of the machine only one of them may hold at a time.
EXCLUSIVE = {"node": "the node (kubelet, containerd)"}


def log(message: str) -> None:
    print(f"dev: {message}", file=sys.stderr, flush=True)


def minutes(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


class Environment:
    """One other release's environment, set up in the background; `python` once ready."""

    def __init__(self, minor: str) -> None:
        self.minor = minor
        self.ready = threading.Event()
        self.python: str | None = None
        self.output = ""
        self.took = 0.0

    def set_up(self) -> None:
        started = time.monotonic()
        venv = f".venv-ansible-core-{self.minor}"
        command = [sys.executable, "scripts/ansible_env.py", self.minor, "--python", "oldest"]
        command += ["--venv", venv, "--label", "dev"]
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
            self.output = done.stderr
            if done.returncode == 0:
                self.python = done.stdout.strip()
        except OSError as error:
            self.output = f"cannot set up {venv}: {error}"
        self.took = time.monotonic() - started
        self.ready.set()


@dataclass
class Stage:
    name: str
    key: str  # in EXPECTED_MINUTES and EXCLUSIVE
    tests: tuple[str, ...]
    python: Callable[[], str | None]  # None: its environment could not be set up
    ready: Callable[[], bool] = lambda: True
    note: Callable[[], str] = lambda: ""
    status: str = "not run"
    took: float = 0.0
    cpu: float = 0.0
    output: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)


def passed_count(report: Path) -> tuple[int, int]:
    """(collected, passed) from a junit report."""
    suites = list(ElementTree.parse(report).getroot().iter("testsuite"))
    collected = sum(int(s.get("tests", 0)) for s in suites)
    unpassed = sum(int(s.get(k, 0)) for s in suites for k in ("failures", "errors", "skipped"))
    return collected, collected - unpassed


class Suite:
    def __init__(self, stages: list[Stage], lanes: int) -> None:
        self.stages = stages
        self.lanes = lanes
        self.held: set[str] = set()
        self.running: dict[int, tuple[Stage, float, Path, IO[bytes]]] = {}

    def run(self) -> bool:
        waiting = sorted(self.stages, key=lambda s: -EXPECTED_MINUTES.get(s.key, 1))
        while waiting or self.running:
            while len(self.running) < self.lanes:
                startable = [
                    s for s in waiting if s.ready() and EXCLUSIVE.get(s.key) not in self.held
                ]
                if not startable:
                    break
                stage = startable[0]
                waiting.remove(stage)
                self.start(stage)
            if self.running:
                self.reap_one()
            elif waiting:
                time.sleep(1)  # an environment still being set up
        return all(s.status == "passed" for s in self.stages)

    def start(self, stage: Stage) -> None:
        python = stage.python()
        if python is None:
            stage.status = "FAILED"
            stage.output = "its environment could not be set up (above)\n"
            self.report(stage)
            return
        report = Path(tempfile.mkstemp(suffix=".xml")[1])
        output = tempfile.TemporaryFile()  # noqa: SIM115 (closed in finish)
        command = [python, "-m", "pytest", f"--junitxml={report}", "--durations=5", *stage.tests]
        log(f"started {stage.name} ({len(self.running) + 1} of {self.lanes} lanes in use)")
        stage.process = subprocess.Popen(
            command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        if stage.key in EXCLUSIVE:
            self.held.add(EXCLUSIVE[stage.key])
        self.running[stage.process.pid] = (stage, time.monotonic(), report, output)

    def reap_one(self) -> None:
        """Wait for a stage to end. Each stage's own pid: waiting for any child would
        take the background set-ups' exit statuses from their subprocess calls."""
        while True:
            for pid in self.running:
                ended, status, usage = os.wait4(pid, os.WNOHANG)
                if ended:
                    self.finish(pid, status, usage)
                    return
            time.sleep(0.5)

    def finish(self, pid: int, status: int, usage: resource.struct_rusage) -> None:
        stage, started, report, output = self.running.pop(pid)
        stage.took = time.monotonic() - started
        stage.cpu = usage.ru_utime + usage.ru_stime
        self.held.discard(EXCLUSIVE.get(stage.key, ""))
        output.seek(0)
        stage.output = output.read().decode(errors="replace")
        output.close()
        stage.status = "passed" if os.waitstatus_to_exitcode(status) == 0 else "FAILED"
        if stage.status == "passed":
            try:
                collected, passed = passed_count(report)
            except (OSError, ElementTree.ParseError) as error:
                stage.output += f"\nno junit report: {error}\n"
                stage.status = "FAILED"
            else:
                if passed <= 0:
                    stage.output += f"\nno test passed ({collected} collected, all skipped)\n"
                    stage.status = "FAILED"
        report.unlink(missing_ok=True)
        self.report(stage)

    def report(self, stage: Stage) -> None:
        note = stage.note()
        sys.stderr.flush()
        print(f"\n===== {stage.name}{f' ({note})' if note else ''}", flush=True)
        sys.stdout.write(stage.output)
        sys.stdout.flush()
        log(f"{stage.name}: {stage.status} in {minutes(stage.took)} (CPU {minutes(stage.cpu)})")

    def stop(self) -> None:
        for stage, *_ in self.running.values():
            if stage.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(stage.process.pid, signal.SIGTERM)


def default_python() -> str:
    return str(VENV_PYTHON)


def unlisted_tiers() -> list[str]:
    """Directories of tests/ that hold tests but are in no tier."""
    return sorted(
        d.name
        for d in (ROOT / "tests").iterdir()
        if d.is_dir() and d.name not in TIERS and next(d.rglob("test_*.py"), None)
    )


def stages(environments: dict[str, Environment]) -> list[Stage]:
    default = [
        Stage(
            f"default environment: tests/{tier}", tier, (f"tests/{tier}",), lambda: str(VENV_PYTHON)
        )
        for tier in TIERS
    ]
    others = []
    for minor, (what, tests) in OTHER_RELEASES.items():
        env = environments[minor]
        others.append(
            Stage(
                f"ansible-core {minor}: {what}",
                minor,
                tests,
                lambda env=env: env.python,
                ready=env.ready.is_set,
                note=lambda env=env: (
                    f".venv-ansible-core-{env.minor} set up in "
                    f"{minutes(env.took)} in the background"
                ),
            )
        )
    return default + others


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    lanes_default = int(os.environ.get("DEV_LANES", "3"))
    parser.add_argument("--lanes", type=int, default=lanes_default, help="stages at a time")
    parser.add_argument("--only", help="these stages (tiers or releases, comma-separated)")
    parser.add_argument("--list", action="store_true", help="print the stages and stop")
    args = parser.parse_args()
    if unlisted := unlisted_tiers():
        log(f"tests/{', tests/'.join(unlisted)} hold tests but are in no tier: add them to TIERS")
        return 1
    environments = {minor: Environment(minor) for minor in OTHER_RELEASES}
    chosen = stages(environments)
    if args.only:
        keys = set(args.only.split(","))
        if unknown := keys - {s.key for s in chosen}:
            parser.error(f"no stage {', '.join(sorted(unknown))}")
        chosen = [s for s in chosen if s.key in keys]
        environments = {m: e for m, e in environments.items() if m in keys}
    suite = Suite(chosen, max(1, args.lanes))
    if args.list:
        for stage in suite.stages:
            print(f"{stage.name}: {' '.join(stage.tests)}")
        return 0

    started = time.monotonic()
    prebuild = subprocess.Popen(
        [str(VENV_PYTHON), "scripts/prebuild.py"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    prebuilt: list[bytes] = []
    reader = threading.Thread(target=lambda: prebuilt.extend(prebuild.stdout or []), daemon=True)
    reader.start()

    def set_up_others() -> None:
        for env in environments.values():
            env.set_up()
            log(f"set up .venv-ansible-core-{env.minor} in {minutes(env.took)}")
            sys.stderr.write(env.output)

    threading.Thread(target=set_up_others, daemon=True).start()
    # CI cancelling the job: the stages (sessions of their own) are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ok = False
    try:
        ok = suite.run()
    finally:
        suite.stop()
        if prebuild.poll() is None:
            os.killpg(prebuild.pid, signal.SIGTERM)
        prebuild.wait()
        reader.join(timeout=5)
        for line in b"".join(prebuilt).decode(errors="replace").splitlines():
            log(line)
    took = time.monotonic() - started
    print(file=sys.stderr)
    for stage in suite.stages:
        note = stage.note()
        name = f"{stage.name} ({note})" if note else stage.name
        log(f"{name:<100} {stage.status:<7} {minutes(stage.took):>6}  CPU {minutes(stage.cpu):>6}")
    cpu = sum(s.cpu for s in suite.stages)
    log(
        f"all stages: {'passed' if ok else 'FAILED'} in {minutes(took)} on {suite.lanes} lanes "
        f"(CPU {minutes(cpu)} on {os.cpu_count()} CPUs)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
