"""How long a local `ansible-operator reconcile` of one object takes, end to
end, and where the time goes: p50 over N runs of each mode, runs of the modes
interleaved so that the machine's load falls on each alike.

    KUBECONFIG=... python bench/local_reconcile.py -n 7 --modes reference,warm

By default it reconciles a Greeting of the tests' operator (tests/operator),
created (`-f --create`) by a first run that is not counted; `--cwd DIR` and
`--object FILE` bench another project (a sample's Memcached). Each run is
`python -m ansible_operator.cli reconcile -f FILE --runner-mode MODE`; its
stdout is read as it comes, so a run is cut into:

    start-up   the command's start to Ansible's `PLAY [` (imports, the object
               read, the proxy, ansible-runner and ansible-playbook started)
    play       `PLAY [` to `PLAY RECAP` (the tasks)
    wind-down  `PLAY RECAP` to the command's exit (artifacts, conditions, stop)

`cpu` is the user+system time of the command and every process it waited for
(Ansible's, the modules'): what the run costs whatever else the machine does.
Wall times on a shared machine are noisy: the load average is printed before
and after; compare cpu, and the modes' p50s within one invocation.
Also printed: the floor of Python importing the command (`import`).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPERATOR = ROOT / "tests" / "operator"
GREETING = """\
apiVersion: test.ansible-operator.io/v1alpha1
kind: Greeting
metadata: {name: bench-local-reconcile}
spec: {greetingMessage: bench}
"""
PHASES = ("wall", "cpu", "start-up", "play", "wind-down")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(command: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    cpu_before = children_cpu()
    started = time.monotonic()
    play = recap = None
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if play is None and line.startswith("PLAY ["):
                play = time.monotonic()
            elif recap is None and line.startswith("PLAY RECAP"):
                recap = time.monotonic()
        errors = process.stderr.read() if process.stderr else ""
        code = process.wait()
    ended = time.monotonic()
    if code != 0 or play is None or recap is None:
        raise SystemExit(f"the run failed (exit {code}): {' '.join(command)}\n{errors}")
    return {
        "wall": ended - started,
        "cpu": children_cpu() - cpu_before,
        "start-up": play - started,
        "play": recap - play,
        "wind-down": ended - recap,
    }


def import_floor(env: dict[str, str], cwd: Path) -> float:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", "import ansible_operator.commands.reconcile"],
        cwd=cwd,
        env=env,
        check=True,
    )
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=5, help="runs of each mode")
    parser.add_argument("--modes", default="reference,warm", help="--runner-mode values")
    parser.add_argument("--cwd", type=Path, default=OPERATOR, help="the operator project")
    parser.add_argument("--object", type=Path, help="the object's YAML (default: a Greeting)")
    parser.add_argument("--namespace", default="default")
    args = parser.parse_args()

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    modes = [mode for mode in args.modes.split(",") if mode]
    with tempfile.TemporaryDirectory() as scratch:
        obj = args.object
        if obj is None:
            obj = Path(scratch) / "greeting.yaml"
            obj.write_text(GREETING)
        base = [sys.executable, "-m", "ansible_operator.cli", "reconcile", "-f", str(obj)]
        base += ["-n", args.namespace]
        # Not counted: creates the object, warms the file cache.
        one_run([*base, "--create"], args.cwd, env)
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"import of the command: {import_floor(env, args.cwd):.2f} s")
        figures: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for _ in range(args.runs):
            for mode in modes:
                figures[mode].append(one_run([*base, "--runner-mode", mode], args.cwd, env))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n{args.runs} runs each, seconds: p50 (min-max)")
    print(f"{'mode':<10}" + "".join(f"{phase:>22}" for phase in PHASES))
    for mode, runs in figures.items():
        cells = []
        for phase in PHASES:
            values = [run[phase] for run in runs]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"{mode:<10}" + "".join(f"{cell:>22}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
