"""ansible-runner's event files written in one call (acceleration `event-files-whole`).

ansible-runner writes each event file with json.dump through a codecs
writer: one encoder call per JSON fragment. A run's fork gives it a `json`
whose dump writes the same text at once.
"""

from __future__ import annotations

import inspect
import json
import types
from typing import Any

from ansible_operator.runner.warm.acceleration import Acceleration, Install, Phase, require, used

NAME = "event-files-whole"


def probe() -> None:
    import ansible_runner.runner as runner_module

    require(
        getattr(runner_module, "json", None) is json,
        "ansible_runner.runner does not use the json module by that name",
    )
    require(
        "json.dump(" in inspect.getsource(runner_module),
        "ansible_runner.runner no longer writes events with json.dump",
    )


def install() -> None:
    import ansible_runner.runner as runner_module

    def dump(obj: Any, fp: Any, *args: Any, **kwargs: Any) -> None:
        used(NAME)
        fp.write(json.dumps(obj, *args, **kwargs))

    whole = types.ModuleType("json")
    whole.__dict__.update(json.__dict__)
    whole.dump = dump  # type: ignore[attr-defined]
    runner_module.json = whole  # type: ignore[attr-defined]


ACCELERATION = Acceleration(
    name=NAME,
    saves="one write instead of one per JSON fragment for each event file",
    relies_on="ansible_runner.runner.json (json.dump)",
    probe=probe,
    installs=(Install(Phase.RUN, lambda _context: install()),),
)
