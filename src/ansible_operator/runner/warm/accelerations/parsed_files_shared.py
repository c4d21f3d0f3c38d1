"""The watches' role and playbook files, parsed once in the warm runner
(acceleration `parsed-files-shared`).

Every run parses its role's YAML again (tasks, handlers, defaults, vars, meta):
each run is a fork, and Ansible's own file cache (`DataLoader._FILE_CACHE`)
lives in one DataLoader of one run. Here the warm runner parses the watches'
files at start, as a run's DataLoader would (same flags), and a run's
DataLoader starts with an entry for a file it is about to load when the file
is the one that was parsed (same size, modification time and inode); it then
copies it as it copies its own cache entries. A file edited since is parsed
by the run as usual; vaulted files are never parsed ahead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Install,
    Phase,
    parameters_of,
    require,
    used,
)

NAME = "parsed-files-shared"
ROLE_PARTS = ("tasks", "handlers", "vars", "defaults", "meta")
SUFFIXES = (".yml", ".yaml", ".json")
MAX_FILES = 2000
MAX_BYTES = 1 << 20
VAULT_HEADER = b"$ANSIBLE_VAULT"

Signature = tuple[int, int, int]
# (path, trusted_as_template) -> (the file's signature when parsed, what it parsed to)
_parsed: dict[tuple[str, bool], tuple[Signature, Any]] = {}


def _signature(path: str) -> Signature | None:
    try:
        found = Path(path).stat()
    except OSError:
        return None
    return (found.st_size, found.st_mtime_ns, found.st_ino)


def _role_files(role: Path) -> Iterator[Path]:
    for part in ROLE_PARTS:
        for path in sorted((role / part).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                yield path


def target_files(targets: list[dict[str, str]]) -> list[Path]:
    """The files runs of these watches parse: each role's, each playbook and the roles
    beside it (`roles/`), at most MAX_FILES."""
    found: dict[Path, None] = {}
    for target in targets:
        if role := target.get("role"):
            found.update(dict.fromkeys(_role_files(Path(role))))
        if playbook := target.get("playbook"):
            found[Path(playbook)] = None
            for role_dir in sorted((Path(playbook).parent / "roles").glob("*")):
                found.update(dict.fromkeys(_role_files(role_dir)))
    return [path for path in found if path.is_file()][:MAX_FILES]


def _accepts_trusted(load_from_file: Any) -> bool:
    return "trusted_as_template" in parameters_of(load_from_file)


def probe() -> None:
    from ansible.parsing.dataloader import DataLoader

    load_from_file = DataLoader.load_from_file
    require(
        parameters_of(load_from_file) >= {"file_name", "cache", "unsafe", "json_only"},
        "DataLoader.load_from_file takes other arguments",
    )
    loader = DataLoader()
    require(isinstance(getattr(loader, "_FILE_CACHE", None), dict), "DataLoader has no _FILE_CACHE")
    require(callable(getattr(loader, "path_dwim", None)), "DataLoader has no path_dwim")


def prime(targets: list[dict[str, str]]) -> int:
    """In the warm runner: parse the watches' files as a run's DataLoader would. Returns
    how many were parsed."""
    from ansible.parsing.dataloader import DataLoader

    loader = DataLoader()
    trusted = _accepts_trusted(DataLoader.load_from_file)
    parsed = 0
    for path in target_files(targets):
        name = str(path.absolute())
        signature = _signature(name)
        if signature is None or signature[0] > MAX_BYTES:
            continue
        try:
            with Path(name).open("rb") as stream:
                if stream.read(len(VAULT_HEADER)) == VAULT_HEADER:
                    continue
            flags = {"trusted_as_template": True} if trusted else {}
            data = loader.load_from_file(name, cache="none", unsafe=True, **flags)
        except Exception:  # a file a run would fail on: the run parses it and says so
            continue
        _parsed[(name, trusted)] = (signature, data)
        parsed += 1
    return parsed


def install() -> None:
    """In a run (a fork of the warm runner): a DataLoader about to parse a file parsed
    ahead finds it in its own cache instead."""
    from ansible.parsing.dataloader import DataLoader

    original = DataLoader.load_from_file
    signature = inspect.signature(original)

    @functools.wraps(original)
    def load_from_file(self: Any, file_name: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            call = signature.bind(self, file_name, *args, **kwargs)
        except TypeError:
            return original(self, file_name, *args, **kwargs)
        call.apply_defaults()
        arguments = call.arguments
        if arguments["cache"] == "all" and not arguments["json_only"]:
            resolved = self.path_dwim(file_name)
            if resolved not in self._FILE_CACHE:
                trusted = bool(arguments.get("trusted_as_template", False))
                entry = _parsed.get((resolved, trusted))
                if entry is not None and entry[0] == _signature(resolved):
                    self._FILE_CACHE[resolved] = entry[1]
                    used(NAME)
        return original(self, file_name, *args, **kwargs)

    DataLoader.load_from_file = load_from_file  # type: ignore[method-assign]


ACCELERATION = Acceleration(
    name=NAME,
    saves="parsing the role's and playbook's YAML in every run (tens of milliseconds "
    "for a role of a few files, more for large ones)",
    relies_on="ansible.parsing.dataloader.DataLoader (load_from_file's arguments, "
    "its _FILE_CACHE, path_dwim)",
    probe=probe,
    installs=(
        Install(Phase.WARM_RUNNER, lambda context: prime(list(context.targets))),
        Install(Phase.PLAYBOOK, lambda _context: install()),
    ),
)
