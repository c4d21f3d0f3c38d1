"""A run's ansible-playbook as a fork of the run (acceleration `playbook-in-fork`).

Where ansible-runner starts `ansible-playbook` in a pseudo-terminal
(pexpect.spawn), the terminal's child becomes ansible-playbook by calling its
entry point instead of exec-ing a new interpreter: Ansible is imported
already, in the warm runner. The run's environment and working directory are
put in place, the settings Ansible read at import are read again where the
run may differ (../ansible_settings.py, settings_read_once.py), and the accelerations of phase
PLAYBOOK are installed. A run whose settings differ in what Ansible read at
import starts the real ansible-playbook instead.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm import acceleration, hits
from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Context,
    Install,
    Phase,
    parameters_of,
    require,
)
from ansible_operator.runner.warm.accelerations import settings_read_once
from ansible_operator.runner.warm.ansible_settings import reread_ansible_settings, stale_settings

NAME = "playbook-in-fork"
PLAYBOOK_COMMAND = "ansible-playbook"


def probe() -> None:
    from ansible import constants

    require(
        _runner_spawns_through_pexpect(),
        "ansible_runner.runner no longer starts its command through pexpect.spawn "
        "with a preexec_fn run in the terminal's child",
    )
    from ansible.cli.playbook import PlaybookCLI

    require(
        callable(getattr(PlaybookCLI, "cli_executor", None)),
        "ansible.cli.playbook.PlaybookCLI.cli_executor is missing",
    )
    config = getattr(constants, "config", None)
    require(
        callable(getattr(constants, "set_constant", None))
        and callable(getattr(config, "get_configuration_definitions", None))
        and callable(getattr(config, "get_config_value", None)),
        "ansible.constants cannot re-read settings (set_constant, "
        "config.get_configuration_definitions, config.get_config_value)",
    )


def _runner_spawns_through_pexpect() -> bool:
    """ansible-runner's Runner, run on a command that exits at once: it starts
    the command through `pexpect.spawn` as looked up when it runs (what
    `install` replaces), and a `preexec_fn` added there runs in the terminal's
    child before the command (where `play_here` would become ansible-playbook)."""
    import pexpect
    from ansible_runner.runner import Runner

    require(
        "preexec_fn" in parameters_of(pexpect.spawn.__init__), "pexpect.spawn takes no preexec_fn"
    )
    real_spawn = pexpect.spawn
    spawned: list[list[str]] = []
    command = ["/bin/sh", "-c", "exit 0"]
    with tempfile.TemporaryDirectory() as scratch:
        hooked = Path(scratch, "preexec_fn ran")

        def spawn(command: str, args: list[str] | None = None, **kwargs: Any) -> Any:
            spawned.append([command, *(args or [])])
            kwargs["preexec_fn"] = hooked.touch
            child = real_spawn(command, args or [], **kwargs)
            with contextlib.suppress(AttributeError):
                child.ptyproc.delayafterclose = 0.0  # the probe need not wait
            return child

        config = acceleration.runner_config_in(Path(scratch, "run"))
        config.command = command
        pexpect.spawn = spawn  # type: ignore[misc]
        try:
            runner = Runner(config)
            runner.run()
        finally:
            pexpect.spawn = real_spawn  # type: ignore[misc]
        return spawned == [command] and hooked.exists() and runner.rc == 0


def install(context: Context) -> None:
    """ansible-runner's pexpect.spawn of ansible-playbook runs `play_here` in
    the terminal's child instead of exec."""
    import pexpect

    real_spawn = pexpect.spawn
    which = pexpect.which

    def spawn(command: str, args: list[str] | None = None, **kwargs: Any) -> Any:
        argv = [command, *(args or [])]
        env = kwargs.get("env") or dict(os.environ)
        if Path(command).name == PLAYBOOK_COMMAND and kwargs.get("preexec_fn") is None:
            resolved = which(command, env=env) or command
            kwargs["preexec_fn"] = lambda: play_here(context, [resolved, *argv[1:]], env)
        return real_spawn(command, args or [], **kwargs)

    pexpect.spawn = spawn  # type: ignore[misc]


def play_here(context: Context, argv: list[str], env: dict[str, str]) -> None:
    """pexpect's pre-exec hook in the pseudo-terminal fork: be ansible-playbook."""
    # Every descriptor but the terminal: pexpect's exec-error pipe among them,
    # which tells its parent the "exec" happened.
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    hits.forget_descriptor()
    stale = stale_settings(env)
    if stale:
        sys.stderr.write(
            "ansible-operator: this run's Ansible settings differ from the warm runner's "
            f"({', '.join(sorted(stale))}): starting a fresh ansible-playbook\n"
        )
        sys.stderr.flush()
        os.execvpe(argv[0], argv, env)
    code = 1
    try:
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
        reread_ansible_settings(settings_read_once.to_reread(env))
        acceleration.used(NAME)
        playing = dataclasses.replace(context, playbook=Path(argv[-1]))
        acceleration.install_phase(Phase.PLAYBOOK, playing)
        # The server configured it already, with this run's settings.
        warnings.filterwarnings("ignore", "AnsibleCollectionFinder has already been configured")
        from ansible.cli.playbook import PlaybookCLI

        sys.argv = list(argv)
        PlaybookCLI.cli_executor(list(argv))
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException as error:
        with contextlib.suppress(Exception):
            sys.stderr.write(f"ansible-operator warm runner: {error!r}\n")
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        # Ansible's own clean-up (its local temporary directory).
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
        os._exit(code)


ACCELERATION = Acceleration(
    name=NAME,
    saves="a Python start and ~1 s of imports per run: ansible-playbook runs in a "
    "fork of the warm runner",
    relies_on="pexpect.spawn(preexec_fn=...) called by ansible_runner.runner; "
    "PlaybookCLI.cli_executor; ansible.constants.set_constant and config",
    probe=probe,
    installs=(Install(Phase.RUN, install),),
)
