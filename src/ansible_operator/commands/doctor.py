"""`ansible-operator doctor`: what this installation runs with, and which
warm-runner accelerations apply to it.

It starts the warm runner as `run` does (same Ansible settings, same
probes) in a scratch directory, prints each acceleration's verdict and
stops it: what it prints is what the operator would log at start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from ansible_operator import __version__
from ansible_operator.commands.run import add_acceleration_switch, switched_off
from ansible_operator.runner.environment import ansible_environment
from ansible_operator.runner.versions import installed_versions
from ansible_operator.runner.warm.acceleration import Verdict
from ansible_operator.runner.warm.accelerations import ACCELERATIONS
from ansible_operator.runner.warm.processes import start_warm_processes


def version_text() -> str:
    lines = [f"ansible-operator {__version__}"]
    lines += [f"  {name:<16}{value}" for name, value in installed_versions().items()]
    lines.append("warm-runner accelerations: ansible-operator doctor")
    return "\n".join(lines)


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python",
        action="store_true",
        help="print only the Python interpreter ansible-operator runs with (where its "
        "pytest plugin is: a generated project's `make test` runs pytest with it)",
    )
    parser.add_argument("--ansible-roles-path", default=None)
    parser.add_argument("--ansible-collections-path", default=None)
    add_acceleration_switch(parser)


async def _verdicts(args: argparse.Namespace) -> dict[str, Verdict]:
    env = ansible_environment(
        roles_path=args.ansible_roles_path,
        collections_path=args.ansible_collections_path,
        pipelining=True,
    )
    with tempfile.TemporaryDirectory(prefix="ansible-operator-doctor-") as scratch:
        warm = await start_warm_processes(Path(scratch), env, switched_off=switched_off(args))
        await warm.stop()
        return warm.accelerations


def doctor(args: argparse.Namespace) -> int:
    if args.python:
        print(sys.executable)
        return 0
    print(version_text().rsplit("\n", 1)[0])
    try:
        verdicts = asyncio.run(_verdicts(args))
    except RuntimeError as error:
        print(f"warm runner: {error}; the operator would run in reference mode")
        return 1
    described = {a.name: a for a in ACCELERATIONS}
    on = sum(verdict.on for verdict in verdicts.values())
    print(f"warm-runner accelerations: {on} of {len(verdicts)} on")
    for name, verdict in verdicts.items():
        about = described.get(name)
        print(f"  {'on ' if verdict.on else 'OFF'}  {name}")
        if about is not None:
            print(f"         saves: {about.saves}")
            print(f"         relies on: {about.relies_on}")
            if about.ansible_core_from > (2, 18):
                release = ".".join(map(str, about.ansible_core_from))
                print(f"         made for ansible-core {release}+")
        if not verdict.on:
            print(f"         off because: {verdict.why}; stock behaviour instead")
    return 0
