"""A run's configuration: one pure function of the plan, the settings and what
the launcher offers.

    configure(plan, settings, mode=, access=, events=, place=, surroundings=)
        -> RunConfiguration
             .inputs          what the run's private directory holds (rundir.write)
             .spec            how its process is started (a Launcher's start)

Every input is data: the plan (what to play, for whom: its caller's,
plan.py), the operator's settings, the launcher's `RunMode` (the modules'
interpreter, pipelining), the proxy's grant (kubeconfig, environment), the
run's way back to the event receiver, where its directories go, and where
the operator runs (`Surroundings`, read by the host as the run starts).
Nothing is read or written here, so each decision is table-tested
(tests/unit/test_run_configuration.py). The warm runner imports Ansible with
`run_ansible_environment` of the same settings, as a run with its mode gets
it: what Ansible read at import is what a run would have read.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ansible_operator.runner import priority, rundir
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.ansible_paths import SearchPaths, ansible_search_paths
from ansible_operator.runner.environment import ansible_environment
from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.rundir import RunDir, RunInputs
from ansible_operator.settings import Settings


@dataclass(frozen=True)
class RunMode:
    """What a launcher offers the runs it starts now (launcher.py); their
    configuration follows it."""

    name: str = "reference"  # as --runner-mode names it
    # What runs name as their modules' Python (the warm module interpreter's
    # shim); None: Ansible's own (`ansible_playbook_python`).
    interpreter: Path | None = None
    pipelining: bool = False  # modules go to their interpreter on stdin


REFERENCE = RunMode()


@dataclass(frozen=True)
class Surroundings:
    """Where the operator runs, as its runs inherit it: read by `here()`, then data."""

    environ: Mapping[str, str]
    cwd: Path
    search: SearchPaths  # Ansible's own roles and collections paths here
    python: str = sys.executable  # runs start `python -m ansible_runner` with it

    @classmethod
    def here(cls) -> Surroundings:
        return cls(dict(os.environ), Path.cwd(), ansible_search_paths())


@dataclass(frozen=True)
class EventAddress:
    """A run's way back to the event receiver (receiver.py): its socket, and
    the channel's token, which only this run holds."""

    socket: Path
    token: str


@dataclass(frozen=True)
class RunPlace:
    """Where a run's directories go: under the runner root, its subject's
    artifacts, and its inputs in a private directory of the given name
    (rundir.new_name(): random)."""

    runner_root: Path
    private_name: str


@dataclass(frozen=True)
class RunSpec:
    """How one run's process is started (a Launcher's start; process.execute)."""

    run_dir: RunDir
    role: Path | None
    playbook: Path | None
    ident: str  # the plan's: names the run's artifacts
    verbosity: int = 2
    timeout: float | None = None
    keep_artifacts: int = 20  # rotated by ansible-runner (0: by the host, or none kept)
    skip_facts: bool = True
    env: dict[str, str] = field(default_factory=dict)  # on top of the operator's
    memory_limit: int | None = None  # bytes for the whole run, where cgroups allow
    python: str = sys.executable  # the interpreter that starts ansible-runner

    def command(self, runner: str = "ansible_runner") -> list[str]:
        """`runner`: the module run as ansible-runner's command line
        (runner/terminal.py's: the same run, on this terminal)."""
        command = [
            self.python,
            "-m",
            runner,
            "run",
            str(self.run_dir.path),
            "--ident",
            self.ident,
            "--artifact-dir",
            str(self.run_dir.artifacts),
        ]
        if self.keep_artifacts > 0:
            command += ["--rotate-artifacts", str(self.keep_artifacts)]
        if self.playbook is not None:
            command += ["-p", str(self.playbook)]
        elif self.role is not None:
            command += [
                "--role",
                self.role.name,
                "--roles-path",
                str(self.role.parent),
                "--hosts",
                "localhost",
            ]
            if self.skip_facts:
                command.append("--role-skip-facts")
        else:
            raise ValueError("a run needs a role or a playbook")
        if self.verbosity > 0:
            command.append("-" + "v" * min(self.verbosity, 7))
        return command


@dataclass(frozen=True)
class RunConfiguration:
    inputs: RunInputs  # what the run's private directory holds (rundir.write)
    spec: RunSpec  # how its process is started (a Launcher's start)


def host_rotates(plan: RunPlan) -> bool:
    """ansible-runner rotates a subject's artifacts when its runs never
    overlap and some are kept; else the host does, after each run (never
    the artifacts of a run in flight)."""
    return plan.shares_subject or plan.keep_artifacts == 0


def run_ansible_environment(
    settings: Settings, mode: RunMode, surroundings: Surroundings
) -> dict[str, str]:
    """The Ansible settings of every run in `mode` (environment.py)."""
    return ansible_environment(
        roles_path=settings.ansible.roles_path,
        collections_path=settings.ansible.collections_path,
        pipelining=mode.pipelining,
        search=surroundings.search,
        cwd=surroundings.cwd,
        environ=surroundings.environ,
    )


def configure(
    plan: RunPlan,
    settings: Settings,
    *,
    mode: RunMode,
    access: RunAccess,
    events: EventAddress,
    place: RunPlace,
    surroundings: Surroundings,
) -> RunConfiguration:
    """Everything `plan`'s run is started with."""
    inputs = RunInputs(
        extravars=plan.extravars,
        envvars=access.env,
        cluster_vars=plan.cluster_vars.encoded if plan.cluster_vars else None,
        kubeconfig=access.kubeconfig,
        ansible_args=plan.ansible_args,
        inventory=settings.ansible.inventory,
        interpreter=mode.interpreter,
    )
    run_dir = rundir.run_dir_of(
        place.runner_root / plan.subject,
        rundir.private_root(place.runner_root),
        place.private_name,
    )
    # The event plugin's way back to us, the run's priority, and the Ansible
    # settings of every run (pipelining to the warm interpreter in warm mode).
    env = {
        SOCKET_ENV: str(events.socket),
        TOKEN_ENV: events.token,
        priority.NICE_ENV: str(plan.nice),
        **run_ansible_environment(settings, mode, surroundings),
    }
    spec = RunSpec(
        run_dir=run_dir,
        role=plan.role,
        playbook=plan.playbook,
        ident=plan.ident,
        verbosity=plan.verbosity,
        timeout=plan.timeout,
        keep_artifacts=0 if host_rotates(plan) else plan.keep_artifacts,
        skip_facts=plan.skip_facts,
        env=env,
        memory_limit=settings.runs.run_memory_limit,
        python=surroundings.python,
    )
    return RunConfiguration(
        inputs=inputs,
        spec=spec,
    )
