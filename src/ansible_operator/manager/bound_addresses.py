"""`--bound-addresses-file`: where the operator's servers listen, for whoever started it
with ':0' ports (a test harness, a local run beside others) and must not read its log
to find them.

    {"health": ["127.0.0.1", 41234], "metrics": [...], "proxy": [...], "webhook": [...]}

Written once every server listens (before leader election), replaced atomically (a
reader sees the whole file or none), and removed when the operator stops.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path


def write_bound_addresses(path: Path, addresses: Mapping[str, tuple[str, int]]) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps({name: list(bound) for name, bound in addresses.items()}))
    partial.replace(path)


def remove_bound_addresses(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read_bound_addresses(path: Path) -> dict[str, tuple[str, int]] | None:
    """The file's addresses; None while the operator has not written it."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return {name: (str(bound[0]), int(bound[1])) for name, bound in data.items()}
