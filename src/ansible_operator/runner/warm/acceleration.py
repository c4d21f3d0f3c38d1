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

The list of accelerations is runner/accelerations.py; this module knows
none of them.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from ansible_operator.runner.warm import hits

# Where an acceleration is probed and used: the warm module interpreter
# (imports only what modules need) or the warm runner (Ansible's controller side).
Side = Literal["modules", "runs"]


class Unavailable(Exception):
    """Why an acceleration does not apply to the installed versions."""


@dataclass(frozen=True)
class Acceleration:
    name: str
    saves: str  # what it saves, for people reading `doctor`
    relies_on: str  # the private parts it uses, named as their owners name them
    side: Side
    probe: Callable[[], None]  # raises Unavailable (or anything) when it must stay off
    # The oldest ansible-core whose private parts it uses; on older ones its probe
    # fails by design (tests expect it off there, and on from this one up).
    ansible_core_from: tuple[int, int] = (2, 18)


@dataclass(frozen=True)
class Verdict:
    on: bool
    why: str = ""  # empty when on

    def as_json(self) -> dict[str, object]:
        return {"on": self.on, "why": self.why}


SWITCHED_OFF = "switched off (--disable-acceleration)"
_verdicts: dict[str, Verdict] = {}


def probe(
    accelerations: Iterable[Acceleration], switched_off: Iterable[str] = ()
) -> dict[str, Verdict]:
    """Probe each acceleration in this process; remember and return the verdicts."""
    off = set(switched_off)
    found: dict[str, Verdict] = {}
    for acceleration in accelerations:
        if acceleration.name in off:
            found[acceleration.name] = Verdict(False, SWITCHED_OFF)
            continue
        try:
            acceleration.probe()
        except Unavailable as reason:
            found[acceleration.name] = Verdict(False, str(reason))
        except Exception as error:  # a probe must not take the warm runner down
            found[acceleration.name] = Verdict(False, f"its probe failed: {error!r}")
        else:
            found[acceleration.name] = Verdict(True)
    _verdicts.update(found)
    return found


def verdict(name: str) -> Verdict:
    return _verdicts.get(name) or Verdict(False, "not probed")


def enabled(name: str) -> bool:
    return verdict(name).on


def install(name: str, installer: Callable[[], None]) -> bool:
    """In a process forked from the warm runner: install the acceleration if
    its probe passed. Installers look everything up before they replace
    anything, so one that raises has changed nothing: the stock behaviour
    stays, for this process, and the run's output says why."""
    if not enabled(name):
        return False
    try:
        installer()
    except Exception as error:
        _verdicts[name] = Verdict(False, f"failed to install: {error!r}")
        sys.stderr.write(f"ansible-operator: acceleration {name} not used here: {error!r}\n")
        return False
    return True


def used(name: str, amount: int = 1) -> None:
    """An acceleration did its work once (`amount` times)."""
    hits.count(name, amount)


def require(condition: object, missing: str) -> None:
    """For probes: `missing` is what is not as expected."""
    if not condition:
        raise Unavailable(missing)


def parameters_of(function: Callable[..., object]) -> set[str]:
    return set(inspect.signature(function).parameters)
