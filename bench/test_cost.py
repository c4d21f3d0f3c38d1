"""What each test costs in CPU, and how long it takes: where the suite's time goes.

    .venv/bin/python bench/test_cost.py [--top N] [--json FILE] PYTEST_ARGS...

Runs pytest with PYTEST_ARGS in a cgroup (v1 cpuacct, or v2) of its own, so
that every process a test starts (operators, runs, modules, the control plane
its fixtures start) is counted, whatever else runs on the machine; a test's CPU
is the cgroup's usage over its setup, call and teardown (a module's or a
session's fixture is charged to the test that set it up or tore it down). Prints
the tests by CPU, then by wall time, then the files, with the share of a core
each kept busy: a test far below one core is waiting, one near it is working.
Needs root (to make the cgroup); elsewhere it says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CGROUP_V1 = Path("/sys/fs/cgroup/cpuacct")
CGROUP_V2 = Path("/sys/fs/cgroup")


def make_cgroup() -> tuple[Path, Path]:
    """A new cgroup, and the file that says its CPU usage."""
    name = f"ansible-operator-test-cost-{os.getpid()}"
    if (CGROUP_V1 / "cpuacct.usage").exists():
        group = CGROUP_V1 / name
        group.mkdir()
        return group, group / "cpuacct.usage"
    if (CGROUP_V2 / "cgroup.controllers").exists():
        group = CGROUP_V2 / name
        group.mkdir()
        return group, group / "cpu.stat"
    raise SystemExit("test_cost: no cgroup v1 cpuacct nor cgroup v2 here")


def remove_cgroup(group: Path) -> None:
    try:
        group.rmdir()
    except OSError as error:  # a process of a test still lives in it
        print(f"test_cost: {group} left behind: {error}", file=sys.stderr)


def table(rows: list[tuple[str, float, float]], title: str, top: int) -> None:
    print(f"\n{title}")
    print(f"{'CPU s':>8} {'wall s':>8} {'cores':>6}  test")
    for name, cpu, wall in rows[:top]:
        cores = cpu / wall if wall else 0.0
        print(f"{cpu:8.1f} {wall:8.1f} {cores:6.2f}  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    parser.add_argument("--json", type=Path, help="also write every test's figures here")
    args, pytest_args = parser.parse_known_args()
    if os.geteuid() != 0:
        raise SystemExit("test_cost: run as root (it makes a cgroup for the tests)")
    group, usage = make_cgroup()
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = dict(os.environ)
        env["TEST_COST_USAGE"] = str(usage)
        env["TEST_COST_OUT"] = out.name
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pytest", "-p", "test_cost_plugin", *pytest_args]

        def enter_cgroup() -> None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

        try:
            status = subprocess.call(command, cwd=ROOT, env=env, preexec_fn=enter_cgroup)
        finally:
            remove_cgroup(group)
        records = json.loads(Path(out.name).read_text() or "[]")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    tests = [(r["test"], r["cpu"], r["wall"]) for r in records]
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, cpu, wall in tests:
        files[name.split("::")[0]][0] += cpu
        files[name.split("::")[0]][1] += wall
    cpu_total = sum(t[1] for t in tests)
    wall_total = sum(t[2] for t in tests)
    table(sorted(tests, key=lambda t: -t[1]), "tests by CPU", args.top)
    table(sorted(tests, key=lambda t: -t[2]), "tests by wall time", args.top)
    by_file = sorted(((f, c, w) for f, (c, w) in files.items()), key=lambda t: -t[1])
    table(by_file, "files by CPU", args.top)
    print(
        f"\n{len(tests)} tests: CPU {cpu_total:.0f} s, wall {wall_total:.0f} s, "
        f"{cpu_total / wall_total if wall_total else 0:.2f} cores on average"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
