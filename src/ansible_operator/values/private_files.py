"""Files that hold secrets (keys, kubeconfigs, a run's extra vars), and the
directories above them: owner-only from birth."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def make_private_dirs(path: Path) -> None:
    """`path` and each missing parent, created 0700: a directory of ours is
    never listable by others, even the top levels of a tree made in one go
    (`mkdir -p` would make them 0777 less the umask). Existing ones are left
    as they are: their owner chose their mode."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        # Another run may make the same level at the same moment, 0700 too.
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)


def write_private(path: Path, data: bytes) -> None:
    """Write a file readable only by its owner, never world-readable even briefly."""
    make_private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    path.chmod(0o600)
