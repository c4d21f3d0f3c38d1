"""ansible-runner's event files written in one call (acceleration `event-files-whole`).

ansible-runner writes each event file with json.dump through a codecs
writer: one encoder call per JSON fragment. A run's fork gives it a `json`
whose dump writes the same text at once.
"""

from __future__ import annotations

import json
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    require,
    runner_config_in,
    used,
)

NAME = "event-files-whole"


def probe() -> None:
    """ansible-runner's Runner, given an event: it writes the event's file
    through the `dump` of the module it names `json` (what `install` replaces),
    and the file holds the event."""
    import ansible_runner.runner as runner_module

    require(
        getattr(runner_module, "json", None) is json,
        "ansible_runner.runner does not use the json module by that name",
    )
    dumped: list[object] = []
    recording = _json_with_dump(lambda obj: dumped.append(obj))
    event = {"uuid": "probe", "counter": 1, "event": "verbose", "stdout": "probe"}
    with tempfile.TemporaryDirectory() as scratch:
        config = runner_config_in(Path(scratch))
        events = Path(config.artifact_dir, "job_events")
        events.mkdir(parents=True, exist_ok=True)
        runner = runner_module.Runner(config)
        runner_module.json = recording  # type: ignore[attr-defined]
        try:
            runner.event_callback(dict(event))
        finally:
            runner_module.json = json  # type: ignore[attr-defined]
        written = events / "1-probe.json"
        found = json.loads(written.read_text()) if written.is_file() else {}
    require(
        len(dumped) == 1 and found.get("stdout") == "probe",
        "ansible_runner.runner no longer writes an event's file with its json module's dump",
    )


def _json_with_dump(seen: Callable[[Any], object]) -> types.ModuleType:
    """A `json` module whose dump writes the whole text at once (and tells `seen`)."""

    def dump(obj: Any, fp: Any, *args: Any, **kwargs: Any) -> None:
        seen(obj)
        fp.write(json.dumps(obj, *args, **kwargs))

    whole = types.ModuleType("json")
    whole.__dict__.update(json.__dict__)
    whole.dump = dump  # type: ignore[attr-defined]
    return whole


def install() -> None:
    import ansible_runner.runner as runner_module

    runner_module.json = _json_with_dump(lambda _obj: used(NAME))  # type: ignore[attr-defined]


ACCELERATION = Acceleration(
    name=NAME,
    saves="one write instead of one per JSON fragment for each event file",
    relies_on="ansible_runner.runner.json (json.dump)",
    probe=probe,
    installs=(Install(Phase.RUN, lambda _context: install()),),
)
