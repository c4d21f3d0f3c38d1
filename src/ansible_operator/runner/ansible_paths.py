"""Where Ansible looks for roles and collections, as it would without us.

Runs get `ANSIBLE_COLLECTIONS_PATH` (ours first: the `operator_sdk.util`
collection) and `ANSIBLE_ROLES_PATH` from the operator. An environment variable
overrides the project's ansible.cfg and Ansible's defaults, so the operator
first asks Ansible what it would use — the environment, ansible.cfg, or the
defaults such as `~/.ansible/collections`, where `ansible-galaxy collection
install` puts collections — and adds to that rather than replacing it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Asked in a child interpreter: importing Ansible's settings in the operator
# would cost its memory for the operator's whole life.
_ASK_ANSIBLE = (
    "import json\n"
    "from ansible import constants as C\n"
    "print(json.dumps({'roles': list(C.DEFAULT_ROLES_PATH),"
    " 'collections': list(C.COLLECTIONS_PATHS)}))\n"
)
# ansible-core's own defaults, should the child fail.
_FALLBACK_ROLES = ("~/.ansible/roles", "/usr/share/ansible/roles", "/etc/ansible/roles")
_FALLBACK_COLLECTIONS = ("~/.ansible/collections", "/usr/share/ansible/collections")


@dataclass(frozen=True)
class SearchPaths:
    roles: tuple[str, ...]
    collections: tuple[str, ...]


@functools.cache
def ansible_search_paths() -> SearchPaths:
    """Ansible's roles and collections paths for this environment and working
    directory (asked once: both are fixed for the operator's life)."""
    try:
        answer = subprocess.run(
            [sys.executable, "-c", _ASK_ANSIBLE],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        found = json.loads(answer.stdout.strip().splitlines()[-1])
        return SearchPaths(tuple(found["roles"]), tuple(found["collections"]))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        return SearchPaths(
            tuple(str(Path(p).expanduser()) for p in _FALLBACK_ROLES),
            tuple(str(Path(p).expanduser()) for p in _FALLBACK_COLLECTIONS),
        )


def joined(paths: Iterable[str]) -> str:
    """A path list for Ansible, each entry once, in order."""
    return os.pathsep.join(dict.fromkeys(p for p in paths if p))
