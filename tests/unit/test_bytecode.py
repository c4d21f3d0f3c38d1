"""Payload sources compiled once: same text, same code, under the payload's
own file name; other text compiled as usual."""

from __future__ import annotations

import traceback
from pathlib import Path

from ansible_operator.runner.warm.accelerations.compiled_module_sources import (
    CompiledSources,
    collection_roots,
)

UTIL = "def boom():\n    raise ValueError('from the util')\n"


def collection(root: Path) -> Path:
    utils = root / "ansible_collections" / "acme" / "demo" / "plugins" / "module_utils"
    utils.mkdir(parents=True)
    (utils / "util.py").write_text(UTIL)
    (utils.parent / "action").mkdir()
    (utils.parent / "action" / "act.py").write_text("x = 1\n")
    return utils / "util.py"


def test_known_source_gets_its_precompiled_code_from_the_same_text(tmp_path: Path) -> None:
    source = collection(tmp_path)
    compiled = CompiledSources()
    compiled.precompile([tmp_path])
    assert len(compiled) == 1  # modules and module_utils only: not action plugins
    code = compiled.compile_source("/tmp/payload.zip/acme/util.py", UTIL.encode())
    namespace: dict[str, object] = {}
    exec(code, namespace)
    try:
        namespace["boom"]()  # type: ignore[operator]
    except ValueError as error:
        frames = traceback.extract_tb(error.__traceback__)
    assert frames[-1].filename == str(source)  # the collection's file: the same text
    assert len(compiled) == 1  # served from the cache, not compiled again


def test_line_endings_do_not_matter_and_other_text_is_compiled(tmp_path: Path) -> None:
    compiled = CompiledSources()
    first = compiled.compile_source("a.py", b"x = 1\r\ny = 2\r\n")
    again = compiled.compile_source("a.py", b"x = 1\ny = 2\n")
    assert again is first
    other = compiled.compile_source("a.py", b"x = 3\n")
    namespace: dict[str, object] = {}
    exec(other, namespace)
    assert namespace["x"] == 3
    assert len(compiled) == 2


def test_collection_roots_are_the_configured_paths_then_sys_path(tmp_path: Path) -> None:
    roots = collection_roots({"ANSIBLE_COLLECTIONS_PATH": f"{tmp_path}/a:{tmp_path}/b"})
    assert roots[:2] == [tmp_path / "a", tmp_path / "b"]
    assert all((root / "ansible_collections").is_dir() for root in roots[2:])
