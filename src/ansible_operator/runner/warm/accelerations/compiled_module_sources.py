"""Compiled module payload sources, shared by every module run
(acceleration `compiled-module-sources`).

A module's payload is a zip; Python imports from a zip by compiling each
source file (zipimport keeps no bytecode), and compiles each one twice (once
to name its file, once to run it): ~0.1 s of a kubernetes.core task. The
warm module interpreter compiles the collections' modules and module_utils
once, keyed by their exact source text, and a payload file whose text is
known gets that code (whose file name is then the collection's source file,
which holds that very text); any other text is compiled as usual, once.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
import types
import zipfile
import zipimport
from collections.abc import Iterable
from pathlib import Path

from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Context,
    Install,
    Phase,
    require,
    used,
)

NAME = "compiled-module-sources"
PAYLOAD_SOURCES = ("plugins/modules", "plugins/module_utils")


def _normalized(source: bytes) -> bytes:
    # What zipimport compiles: line endings normalized first.
    return source.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _key(source: bytes) -> bytes:
    return hashlib.sha256(_normalized(source)).digest()


class CompiledSources:
    def __init__(self) -> None:
        self._codes: dict[bytes, types.CodeType] = {}

    def __len__(self) -> int:
        return len(self._codes)

    def precompile(self, collection_roots: Iterable[Path]) -> None:
        for root in collection_roots:
            base = root if root.name == "ansible_collections" else root / "ansible_collections"
            for collection in base.glob("*/*"):
                for sub in PAYLOAD_SOURCES:
                    for path in (collection / sub).rglob("*.py"):
                        with contextlib.suppress(OSError, SyntaxError, ValueError):
                            source = path.read_bytes()
                            self._codes[_key(source)] = compile(
                                _normalized(source), str(path), "exec", dont_inherit=True
                            )

    def compile_source(self, pathname: str, source: bytes | str) -> types.CodeType:
        data = source.encode() if isinstance(source, str) else source
        key = _key(data)
        code = self._codes.get(key)
        if code is not None:
            used(NAME)
        else:
            code = compile(_normalized(data), pathname, "exec", dont_inherit=True)
            self._codes[key] = code
        return code

    def install(self) -> None:
        """Serve zipimport's compilations from here (in this process)."""
        zipimport._compile_source = self.compile_source  # type: ignore[attr-defined]


def probe() -> None:
    """zipimport still compiles a zipped source through
    _compile_source(pathname, source): a module imported from a zip here runs
    the very code that function returned (what `install` serves from its cache)."""
    import inspect

    compile_source = getattr(zipimport, "_compile_source", None)
    require(callable(compile_source), "zipimport._compile_source is missing")
    require(
        list(inspect.signature(compile_source).parameters) == ["pathname", "source"],  # type: ignore[arg-type]
        "zipimport._compile_source takes other arguments than (pathname, source)",
    )
    returned: list[types.CodeType] = []

    def noted(pathname: str, source: bytes | str) -> types.CodeType:
        returned.append(compile_source(pathname, source))  # type: ignore[misc]
        return returned[-1]

    name = f"_ansible_operator_probe_{os.getpid()}"
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch, "payload.zip")
        with zipfile.ZipFile(archive, "w") as payload:
            payload.writestr(f"{name}.py", "import sys\nRAN = sys._getframe(0).f_code\n")
        zipimport._compile_source = noted  # type: ignore[attr-defined]
        try:
            spec = zipimport.zipimporter(str(archive)).find_spec(name)
            require(spec is not None and spec.loader is not None, "zipimport finds no module")
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        finally:
            zipimport._compile_source = compile_source  # type: ignore[attr-defined]
            with contextlib.suppress(AttributeError):
                zipimport._zip_directory_cache.pop(str(archive), None)  # type: ignore[attr-defined]
    ran = getattr(module, "RAN", None)
    require(
        any(ran is code for code in returned),
        "zipimport no longer runs the code _compile_source compiles from a zipped source",
    )


def collection_roots(env: dict[str, str]) -> list[Path]:
    """Where Ansible looks for collections: the configured paths, then sys.path."""
    configured = env.get("ANSIBLE_COLLECTIONS_PATH") or env.get("ANSIBLE_COLLECTIONS_PATHS") or ""
    roots = [Path(entry) for entry in configured.split(os.pathsep) if entry]
    roots += [
        Path(entry) for entry in sys.path if entry and Path(entry, "ansible_collections").is_dir()
    ]
    return roots


# The module interpreter's: compiled before it forks, so every module run shares them.
COMPILED = CompiledSources()


def _precompile(_context: Context) -> None:
    COMPILED.precompile(collection_roots(dict(os.environ)))


def _install(_context: Context) -> None:
    COMPILED.install()


ACCELERATION = Acceleration(
    name=NAME,
    saves="~0.1 s per kubernetes.core task: collection modules and module_utils "
    "compiled once, not twice per module run",
    relies_on="zipimport._compile_source(pathname, source)",
    probe=probe,
    installs=(Install(Phase.MODULE_SERVER, _precompile), Install(Phase.MODULE, _install)),
)
