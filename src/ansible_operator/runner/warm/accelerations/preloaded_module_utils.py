"""Collection module_utils imported once by the warm module interpreter, used by
every module whose payload carries the very same files (acceleration
`preloaded-module-utils`).

A kubernetes.core task's module imports ~25 of its collection's module_utils
from its payload (a zip) each time it runs: ~7.5 ms of every task, although
the files are those of the collection the operator's Ansible found, task
after task. The warm module interpreter imports, once, the module_utils that
the modules of Operator SDK's roles import (`MODULES`), from the collections
paths in Ansible's order. A module run starts with them out of sys.modules;
before its module is imported (Ansible's payload wrapper runs it with
`runpy.run_module`, in every release), each is compared with the payload's
file of the same name (its size and CRC-32, as the zip's directory gives
them), and those the payload carries come back only when every one it carries
is identical; their packages then look for anything else in the payload, as
they would have. Any difference (another version of the collection on the
collections path, an edited file) and none comes back: the module imports its
payload's, exactly as without this, as does a module that is no payload's.
One the payload does not carry stays out: Ansible found the module does not
import it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import runpy
import sys
import types
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Context,
    ForkCheck,
    Install,
    Phase,
    require,
    started_in_a_fork,
    used,
)
from ansible_operator.runner.warm.accelerations.compiled_module_sources import collection_roots

NAME = "preloaded-module-utils"
# The modules of Operator SDK's scaffolded roles, whose module_utils are
# preloaded: what they import, not every module_util of their collections
# (kubernetes.core's `copy` alone brings the whole CoreV1Api and its models,
# ~22 MiB in every replica for a module few roles run). Any other module
# imports its payload's, as usual.
MODULES = {
    "kubernetes.core": ("k8s", "k8s_info"),
    "operator_sdk.util": ("k8s_status", "k8s_event"),
}
ROOT_PACKAGE = "ansible_collections"


def _identity(source: bytes) -> tuple[int, int]:
    """A file as a zip's directory describes it: its size and CRC-32. The files
    come from the operator's own collections paths (whoever can change them
    runs code already): what is told apart is another version or an edit, and
    a payload's directory says it without a byte being decompressed."""
    return len(source), zlib.crc32(source)


@dataclass(frozen=True)
class Preloaded:
    entry: str  # its file's name in a payload: ansible_collections/.../x.py or .../__init__.py
    identity: tuple[int, int]  # _identity of its source
    package: bool


class PreloadedModules:
    """The module interpreter's preloaded collection modules, and the check
    each module run makes against its payload."""

    def __init__(self) -> None:
        self.modules: dict[str, Preloaded] = {}
        self._hidden: dict[str, types.ModuleType] = {}

    def preload(
        self, roots: Iterable[Path], modules: Mapping[str, Iterable[str]] = MODULES
    ) -> None:
        """Import the module_utils the `modules` of each collection import, each
        collection from the first of `roots` that has it (Ansible's order), and
        note what a payload would hold of each."""
        bases = _bases(roots)
        wanted: list[str] = []
        for collection, names in modules.items():
            namespace, name = collection.split(".")
            for base in bases:
                plugins = base / ROOT_PACKAGE / namespace / name / "plugins" / "modules"
                if plugins.is_dir():
                    wanted += [
                        f"{ROOT_PACKAGE}.{namespace}.{name}.plugins.modules.{module}"
                        for module in names
                        if (plugins / f"{module}.py").is_file()
                    ]
                    break
        if not wanted:
            return
        before = set(sys.modules)
        added = [str(base) for base in bases if str(base) not in sys.path]
        sys.path[:0] = added
        try:
            for name in wanted:
                with contextlib.suppress(Exception):  # one that does not import is left out
                    importlib.import_module(name)
        finally:
            for entry in added:
                with contextlib.suppress(ValueError):
                    sys.path.remove(entry)
            importlib.invalidate_caches()
        for name in sorted(set(sys.modules) - before, reverse=True):  # children first
            if name != ROOT_PACKAGE and not name.startswith(ROOT_PACKAGE + "."):
                continue
            if ".plugins.modules" in name:
                _forget(name)  # a module runs from its payload, as __main__, each time
                continue
            noted = _noted(name, sys.modules[name], bases)
            if noted is None:
                _forget(name)  # from outside the collections paths: never to be checked, so gone
            else:
                self.modules[name] = noted

    def match(self, payload: zipfile.ZipFile) -> set[str]:
        """The preloaded modules a module run with `payload` may use: none when
        one the payload carries differs from it."""
        kept: set[str] = set()
        for name, preloaded in self.modules.items():
            try:
                info = payload.getinfo(preloaded.entry)
            except KeyError:
                continue  # the module does not import it
            if (info.file_size, info.CRC) != preloaded.identity:
                return set()
            kept.add(name)
        return kept

    def hide(self) -> None:
        """In a module run, first: out of sys.modules, so that nothing sees
        them but through `use` (a module that is no payload's imports as it
        would have)."""
        for name in self.modules:
            module = sys.modules.pop(name, None)
            if module is not None:
                self._hidden[name] = module

    def use(self, modlib: str) -> None:
        """In a module run, before its module is imported from the payload
        `modlib`: back into sys.modules, the preloaded modules it may use, each
        package looking in the payload for the rest."""
        kept: set[str] = set()
        with contextlib.suppress(OSError, zipfile.BadZipFile), zipfile.ZipFile(modlib) as payload:
            kept = self.match(payload) & set(self._hidden)
        if any(name in sys.modules for name in kept):
            return  # imported otherwise meanwhile: that one stays, alone
        for name in kept:
            module = self._hidden.pop(name)
            preloaded = self.modules[name]
            module.__file__ = f"{modlib}/{preloaded.entry}"
            if preloaded.package:
                module.__path__ = [f"{modlib}/{preloaded.entry.rpartition('/')[0]}"]
            sys.modules[name] = module
        for name in list(self._hidden):  # not the payload's: not reachable from a kept package
            parent, _, child = name.rpartition(".")
            if parent in kept and getattr(sys.modules[parent], child, None) is self._hidden[name]:
                delattr(sys.modules[parent], child)
        if kept:
            used(NAME, len(kept))


def _bases(roots: Iterable[Path]) -> list[Path]:
    """Each root as the directory that holds `ansible_collections`, once each."""
    bases: list[Path] = []
    for root in roots:
        base = root.parent if root.name == ROOT_PACKAGE else root
        if base not in bases and (base / ROOT_PACKAGE).is_dir():
            bases.append(base)
    return bases


def _noted(name: str, module: types.ModuleType, bases: list[Path]) -> Preloaded | None:
    package = hasattr(module, "__path__")
    entry = name.replace(".", "/") + ("/__init__.py" if package else ".py")
    origin = getattr(module, "__file__", None)
    if origin is None:
        # A namespace package on disk: Ansible gives it an empty __init__.py in a payload.
        return Preloaded(entry, _identity(b""), package) if package else None
    path = Path(origin)
    if not any(path.is_relative_to(base) for base in bases):
        return None
    with contextlib.suppress(OSError):
        return Preloaded(entry, _identity(path.read_bytes()), package)
    return None


def _forget(name: str) -> None:
    """`name` imported again from the payload, if at all: out of sys.modules and
    of its package's attributes (`from package import name` reads those first)."""
    sys.modules.pop(name, None)
    parent, _, child = name.rpartition(".")
    holder = sys.modules.get(parent)
    if holder is not None and isinstance(getattr(holder, child, None), types.ModuleType):
        with contextlib.suppress(AttributeError):
            delattr(holder, child)


def payload_of(init_globals: dict[str, Any] | None) -> str | None:
    """The payload a module runs from: the wrapper names it in the module's
    globals (`_modlib_path`), and puts it first on sys.path."""
    named = (init_globals or {}).get("_modlib_path")
    if isinstance(named, str):
        return named
    return next((entry for entry in sys.path if entry.endswith(".zip")), None)


def checked_run_module(
    preloaded: PreloadedModules, stock: Callable[..., Any]
) -> Callable[..., Any]:
    def run_module(
        mod_name: str,
        init_globals: dict[str, Any] | None = None,
        run_name: str | None = None,
        alter_sys: bool = False,
    ) -> Any:
        modlib = payload_of(init_globals)
        if modlib is not None:
            preloaded.use(modlib)
        return stock(mod_name, init_globals, run_name, alter_sys)

    return run_module


# ----- the probe: Python's imports as `use` relies on them, in a fork --------------------
PROBE_UTIL = "TOKEN = object()\n"
PROBE_USES = "from ansible_collections.probe.coll.plugins.module_utils import util\n"
PROBE_MODULE = (
    "from ansible_collections.probe.coll.plugins.module_utils import util\n"
    "from ansible_collections.probe.coll.plugins.module_utils import extra\n"
    "SEEN = (util.TOKEN, extra.__file__)\n"
)


def probe() -> ForkCheck:
    """A module run from a payload holding the preloaded module's very file
    gets the preloaded module, and the payload's own for what was not
    preloaded; one whose file differs gets the payload's."""
    require(
        list(inspect.signature(runpy.run_module).parameters)[:4]
        == ["mod_name", "init_globals", "run_name", "alter_sys"],
        "runpy.run_module takes other arguments than (mod_name, init_globals, run_name, alter_sys)",
    )

    def conclusion(found: str) -> None:
        require(not found, found)

    return started_in_a_fork(_rehearse, conclusion)


def _rehearse() -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:  # a probe leaves nothing behind
        return _rehearse_in(Path(scratch))


def _rehearse_in(scratch: Path) -> str:
    collection = scratch / ROOT_PACKAGE / "probe" / "coll" / "plugins"
    (collection / "module_utils").mkdir(parents=True)
    (collection / "module_utils" / "util.py").write_text(PROBE_UTIL)
    (collection / "modules").mkdir()
    (collection / "modules" / "uses.py").write_text(PROBE_USES)
    preloaded = PreloadedModules()
    preloaded.preload([scratch], {"probe.coll": ["uses"]})
    util = sys.modules.get(f"{ROOT_PACKAGE}.probe.coll.plugins.module_utils.util")
    if util is None or not preloaded.modules:
        return "the module_utils were not imported from the collections path"
    run_module = checked_run_module(preloaded, runpy.run_module)

    def seen(util_source: str) -> tuple[Any, ...]:
        archive = scratch / f"payload-{len(util_source)}.zip"
        with zipfile.ZipFile(archive, "w") as payload:
            for package in ("", "/probe", "/probe/coll", "/probe/coll/plugins"):
                payload.writestr(f"{ROOT_PACKAGE}{package}/__init__.py", "")
            utils = f"{ROOT_PACKAGE}/probe/coll/plugins/module_utils"
            payload.writestr(f"{utils}/__init__.py", "")
            payload.writestr(f"{utils}/util.py", util_source)
            payload.writestr(f"{utils}/extra.py", PROBE_UTIL)
            payload.writestr(f"{ROOT_PACKAGE}/probe/coll/plugins/modules/__init__.py", "")
            payload.writestr(f"{ROOT_PACKAGE}/probe/coll/plugins/modules/mod.py", PROBE_MODULE)
        preloaded.hide()
        sys.path.insert(0, str(archive))
        try:
            done = run_module(
                f"{ROOT_PACKAGE}.probe.coll.plugins.modules.mod",
                {"_modlib_path": str(archive)},
                "__main__",
                True,
            )
        finally:
            sys.path.remove(str(archive))
        return tuple(done["SEEN"])

    token = util.TOKEN  # type: ignore[attr-defined]
    same = seen(PROBE_UTIL)
    if same[0] is not token:
        return "a module run from a payload with the same file did not get the preloaded module"
    if not str(same[1]).startswith(str(scratch / "payload-")):
        return "a module run did not import from its payload what was not preloaded"
    other = seen(PROBE_UTIL + "# edited\n")
    if other[0] is token:
        return "a module run from a payload with another file got the preloaded module"
    return ""


# The module interpreter's: imported before it forks, so every module run shares them.
PRELOADED = PreloadedModules()


def _preload(_context: Context) -> None:
    PRELOADED.preload(collection_roots(dict(os.environ)))
    runpy.run_module = checked_run_module(PRELOADED, runpy.run_module)  # type: ignore[assignment]


def _hide(_context: Context) -> None:
    PRELOADED.hide()


ACCELERATION = Acceleration(
    name=NAME,
    saves="~7.5 ms per kubernetes.core task: its collection's module_utils imported once "
    "by the module interpreter, used when the payload carries the very same files",
    relies_on="Ansible's payload wrapper running the module with "
    "runpy.run_module(mod_name, init_globals with _modlib_path, run_name, alter_sys)",
    probe=probe,
    # Not before the fork: the warm runner's Ansible would find the collections
    # imported as plain packages, not through its collection loader.
    installs=(Install(Phase.MODULE_SERVER, _preload), Install(Phase.MODULE, _hide)),
)
