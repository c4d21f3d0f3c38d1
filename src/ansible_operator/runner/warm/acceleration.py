"""What an acceleration is, and how one is switched on or left off.

Each warm-runner acceleration reaches into a private part of ansible-core,
ansible-runner, pexpect or Python (a method it replaces, a module attribute,
a cache directory's name). Private parts change between releases without
notice, so each acceleration comes with a probe that checks, against the
installed versions and before any run, that what it relies on is there and
means what it expects. A probe that fails leaves that acceleration off (the
stock behaviour instead) and says why; the others are unaffected. An
acceleration that still fails to install in a run is off for that run only,
and the run goes on.

Each acceleration is a record: what it saves, what it relies on, its probe,
and its installers, each for a phase of a warm process's life (`Phase`).
The warm processes probe the records once, then at each phase install those
that are on (`install_phase`); they name no acceleration. The list of
accelerations is accelerations/ (one module each, listed in its
__init__); this module knows none of them.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ansible_operator.runner.warm import hits

# Where an acceleration is probed: the warm module interpreter (imports only
# what modules need) or the warm runner (Ansible's controller side).
Side = Literal["modules", "runs"]


class Phase(enum.Enum):
    """When, and in which process, an installer runs; in the order of a warm
    runner's life."""

    # The warm module interpreter, once, before it serves: what its forks share.
    MODULE_INTERPRETER = "module interpreter"
    # The same, in its own process once forked from the warm runner's: what
    # Ansible's controller side, imported there next, must not find imported.
    MODULE_SERVER = "module server"
    MODULE = "module"  # each module run, in its fork, before the module runs
    # The warm runner, once, Ansible imported, before it serves: what its forks share.
    WARM_RUNNER = "warm runner"
    # Once the warm runner serves, in a fork of it at a low priority, when the
    # watches have roles or playbooks: work done ahead for their runs.
    BACKGROUND = "background"
    RUN = "run"  # each run, in its fork, before ansible-runner starts
    PLAYBOOK = "playbook"  # each run's ansible-playbook, in its fork, before it plays


MODULE_SIDE = (Phase.MODULE_INTERPRETER, Phase.MODULE_SERVER, Phase.MODULE)


@dataclass(frozen=True)
class Context:
    """What installers may need to know of the warm runner and the run."""

    scratch: Path = Path()  # the warm runner's directory: caches its runs share
    targets: tuple[dict[str, str], ...] = ()  # the watches' roles and playbooks
    playbook: Path | None = None  # in phase PLAYBOOK: the playbook played


@dataclass(frozen=True)
class Install:
    phase: Phase
    # Looks everything up before it replaces anything: one that raises has
    # changed nothing.
    installer: Callable[[Context], object]


class Unavailable(Exception):
    """Why an acceleration does not apply to the installed versions."""


@dataclass(frozen=True)
class Acceleration:
    name: str
    saves: str  # what it saves, for people reading `doctor`
    relies_on: str  # the private parts it uses, named as their owners name them
    # Raises Unavailable (or anything) when it must stay off; may return a
    # ForkCheck (started_in_a_fork) whose answer it concludes from later.
    probe: Callable[[], ForkCheck | None]
    # Where it is installed; none: its own code asks `enabled(name)` where it applies.
    installs: tuple[Install, ...] = ()
    needs: tuple[str, ...] = ()  # accelerations without which it is not installed
    # The oldest ansible-core whose private parts it uses; on older ones its probe
    # fails by design (tests expect it off there, and on from this one up).
    ansible_core_from: tuple[int, int] = (2, 18)

    @property
    def side(self) -> Side:
        """Probed where it is installed: in the module interpreter for what
        modules use, in the warm runner for the rest."""
        module_side = any(step.phase in MODULE_SIDE for step in self.installs)
        return "modules" if module_side else "runs"


@dataclass(frozen=True)
class Verdict:
    on: bool
    why: str = ""  # empty when on

    def as_json(self) -> dict[str, object]:
        return {"on": self.on, "why": self.why}


SWITCHED_OFF = "switched off (--disable-acceleration)"
FORK_TIMEOUT = 30.0  # seconds a probe's check in a fork may take (started_in_a_fork)
_verdicts: dict[str, Verdict] = {}
_probed: dict[str, Acceleration] = {}  # in the order probed: the order installed
_pending: dict[str, ForkCheck] = {}  # probes whose check in a fork has not answered yet


def probe(
    accelerations: Iterable[Acceleration], switched_off: Iterable[str] = (), *, wait: bool = True
) -> dict[str, Verdict]:
    """Probe each acceleration in this process; remember and return the verdicts.
    A probe that returns a `ForkCheck` goes on in its fork while the next ones
    run; with `wait=False` its verdict is left pending, to be concluded where it
    is first asked for (`verdict`) or by `settle()`: the warm runner's start
    goes on meanwhile. The verdicts returned are those known now."""
    off = set(switched_off)
    names: list[str] = []
    for acceleration in accelerations:
        _probed[acceleration.name] = acceleration
        names.append(acceleration.name)
        if acceleration.name in off:
            _verdicts[acceleration.name] = Verdict(False, SWITCHED_OFF)
            continue
        try:
            check = acceleration.probe()
        except Exception as error:
            _verdicts[acceleration.name] = _failed(error)
        else:
            if isinstance(check, ForkCheck):
                _pending[acceleration.name] = check
            else:
                _verdicts[acceleration.name] = Verdict(True)
    if wait:
        settle()
    return {name: _verdicts[name] for name in names if name in _verdicts}


def _failed(error: Exception) -> Verdict:
    if isinstance(error, Unavailable):
        return Verdict(False, str(error))
    return Verdict(False, f"its probe failed: {error!r}")  # it must not take the runner down


def _conclude(name: str) -> None:
    check = _pending.pop(name)
    try:
        check.conclude()
    except Exception as error:
        _verdicts[name] = _failed(error)
    else:
        _verdicts[name] = Verdict(True)


def settle() -> None:
    """Every probe's check in a fork answered and concluded."""
    for name in list(_pending):
        _conclude(name)


def verdict(name: str) -> Verdict:
    if name in _pending:
        _conclude(name)
    return _verdicts.get(name) or Verdict(False, "not probed")


def enabled(name: str) -> bool:
    return verdict(name).on


def _wanted(acceleration: Acceleration) -> bool:
    return enabled(acceleration.name) and all(enabled(name) for name in acceleration.needs)


def installers(phase: Phase) -> list[tuple[str, Callable[[Context], object]]]:
    """The installers of `phase` to run in this process: of the accelerations
    probed here and on, in the order probed."""
    # The phase first: a verdict still pending is waited for only where it matters.
    return [
        (acceleration.name, step.installer)
        for acceleration in _probed.values()
        for step in acceleration.installs
        if step.phase is phase and _wanted(acceleration)
    ]


def install_phase(phase: Phase, context: Context) -> None:
    """Install, in this process, every acceleration that is on and has an
    installer for `phase`. One that raises has changed nothing: the stock
    behaviour stays, for this process (and its forks), and the output says why."""
    for name, installer in installers(phase):
        if not enabled(name):  # an earlier installer of it failed here
            continue
        try:
            installer(context)
        except Exception as error:
            _verdicts[name] = Verdict(False, f"failed to install: {error!r}")
            sys.stderr.write(f"ansible-operator: acceleration {name} not used here: {error!r}\n")


def used(name: str, amount: int = 1) -> None:
    """An acceleration did its work once (`amount` times)."""
    hits.count(name, amount)


# ----- for probes: each calls what its acceleration relies on and checks the
# effect (on a small input, in a scratch directory), never reads source text.
def require(condition: object, missing: str) -> None:
    """For probes: `missing` is what is not as expected."""
    if not condition:
        raise Unavailable(missing)


def parameters_of(function: Callable[..., object]) -> set[str]:
    return set(inspect.signature(function).parameters)


@dataclass
class ForkCheck:
    """A probe's check running in a fork (`started_in_a_fork`): `conclude()`
    waits for its answer and hands it to the probe's conclusion, which raises
    Unavailable when the acceleration must stay off."""

    pid: int
    read: int
    conclusion: Callable[[str], None]
    timeout: float
    started: float

    def conclude(self) -> None:
        left = max(0.0, self.timeout - (time.monotonic() - self.started))
        self.conclusion(_answer(self.pid, self.read, left))


def started_in_a_fork(
    check: Callable[[], str], conclusion: Callable[[str], None], timeout: float = FORK_TIMEOUT
) -> ForkCheck:
    """For probes: `check()` started in a fork of this process, so that what
    it sets up (an initialised plugin loader, a setting changed) stays there,
    its stdio on /dev/null (this process's stdout may be the operator's pipe).
    What it returns ("" when all was as expected, else why it said nothing) is
    given to `conclusion` once asked for; the probe returns what this returns,
    and the warm runner's start goes on while the fork checks."""
    pid, read = _fork_check(check)
    return ForkCheck(pid, read, conclusion, timeout, time.monotonic())


def _fork_check(check: Callable[[], str]) -> tuple[int, int]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the fork)
        os.close(read)
        hits.use(None)  # what a check does is not a use
        answer = "the check said nothing"
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            answer = check()
        except BaseException as error:
            answer = f"the check failed: {error!r}"
        finally:
            with contextlib.suppress(BaseException):
                os.write(write, json.dumps(answer).encode())
            os._exit(0)
    os.close(write)
    return pid, read


def _answer(pid: int, read: int, timeout: float) -> str:
    try:
        ready, _, _ = select.select([read], [], [], timeout)
        data = b""
        if ready:
            with os.fdopen(read, "rb", closefd=False) as pipe:
                data = pipe.read()
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    finally:
        os.close(read)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    if not data:
        return f"the check ended without an answer (in {timeout:g}s)"
    try:
        answer = json.loads(data)
    except ValueError:
        return "the check's answer was cut"
    return str(answer)


def runner_config_in(directory: Path) -> Any:
    """An ansible-runner RunnerConfig prepared as for a run of an empty
    playbook in `directory` (its private data directory, made here)."""
    from ansible_runner.config.runner import RunnerConfig

    (directory / "project").mkdir(parents=True, exist_ok=True)
    (directory / "project" / "probe.yml").write_text("[]\n")
    config = RunnerConfig(private_data_dir=str(directory), playbook="probe.yml", ident="probe")
    config.prepare()
    return config
