"""The small Go programs under tools/ that check our output with the real libraries
(operator-framework/api's bundle validators, cli-utils's kstatus), built once per
version of their sources into the local cache."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_operator.cluster.build import cache_root

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def built(name: str) -> Path:
    """tools/<name> built (skipped without Go on PATH)."""
    go = shutil.which("go")
    if go is None:
        pytest.skip(f"no `go` on PATH: tools/{name} needs Go")
    source = TOOLS / name
    digest = hashlib.sha256()
    for path in sorted(source.glob("*")):
        if path.suffix in {".go", ".mod", ".sum"}:
            digest.update(path.name.encode() + path.read_bytes())
    binary = cache_root() / name / digest.hexdigest()[:16] / name
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    # One build at a time (`./dev test` builds them in the background meanwhile).
    with (binary.parent / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        partial = binary.with_name(f"{name}.partial")
        done = subprocess.run(
            [go, "build", "-o", str(partial), "."],
            cwd=source,
            capture_output=True,
            text=True,
            timeout=1500,
            env={**os.environ, "GOTOOLCHAIN": "local"},
        )
        assert done.returncode == 0, f"go build of tools/{name} failed:\n{done.stderr}"
        partial.rename(binary)  # whole or not at all: a killed build leaves no binary
    return binary
