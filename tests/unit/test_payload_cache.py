"""Shared module payloads are keyed by every source they can be built from:
any change to one of them is a different cache."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_operator.runner.warm.accelerations.shared_payload_cache import fingerprint, source_dirs


def layout(tmp_path: Path) -> dict[str, Path]:
    collection = tmp_path / "collections" / "ansible_collections" / "acme" / "demo"
    (collection / "plugins" / "module_utils").mkdir(parents=True)
    (collection / "plugins" / "module_utils" / "util.py").write_text("A = 1\n")
    role = tmp_path / "roles" / "web"
    (role / "library").mkdir(parents=True)
    (role / "library" / "mod.py").write_text("B = 1\n")
    (role / "tasks").mkdir()
    (role / "tasks" / "main.yml").write_text("[]\n")
    playbook = tmp_path / "project" / ("a" * 32)
    playbook.parent.mkdir()
    playbook.write_text("- hosts: localhost\n  roles: [web]\n")
    return {"util": collection / "plugins" / "module_utils" / "util.py", "playbook": playbook}


def key(tmp_path: Path, playbook: Path) -> str:
    dirs = source_dirs(
        collection_roots=[str(tmp_path / "collections")],
        roles_paths=[str(tmp_path / "roles")],
        playbook=playbook,
        module_paths=[],
    )
    return fingerprint(dirs, salt=b"")


def test_unchanged_sources_give_the_same_key(tmp_path: Path) -> None:
    paths = layout(tmp_path)
    assert key(tmp_path, paths["playbook"]) == key(tmp_path, paths["playbook"])


def test_an_edited_module_util_or_a_new_library_module_change_the_key(tmp_path: Path) -> None:
    paths = layout(tmp_path)
    before = key(tmp_path, paths["playbook"])
    paths["util"].write_text("A = 2\n")
    stat = paths["util"].stat()
    os.utime(paths["util"], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    edited = key(tmp_path, paths["playbook"])
    assert edited != before
    (tmp_path / "roles" / "web" / "library" / "other.py").write_text("C = 1\n")
    assert key(tmp_path, paths["playbook"]) != edited


def test_task_files_do_not_change_the_key(tmp_path: Path) -> None:
    paths = layout(tmp_path)
    before = key(tmp_path, paths["playbook"])
    (tmp_path / "roles" / "web" / "tasks" / "main.yml").write_text("- debug: {}\n")
    assert key(tmp_path, paths["playbook"]) == before
