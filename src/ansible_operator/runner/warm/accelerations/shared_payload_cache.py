"""Module payloads shared between warm runs (acceleration `shared-payload-cache`).

Before a task's module runs, Ansible builds its payload (AnsiballZ): it
parses the module and, recursively, every module_utils it imports, and zips
them. That is half the CPU of a warm reconcile, and Ansible caches it only
for one ansible-playbook process, in its local temporary directory. Warm runs
point that cache at a directory they share (`ansiballz_cache` is a symlink),
one per *source fingerprint*: every file a payload can be built from (the
modules and module_utils of the collections paths, of the roles paths and
next to the playbook, the configured module and module_utils paths, the
Ansible release) by path, size and modification time, and the playbook
itself (role modules are cached under `ansible.legacy.<name>`, so two
playbooks must not share). Any change to any of them is a new fingerprint,
so a payload is never older than its sources.

Up to ansible-core 2.18, Ansible serializes the building of a payload with
locks it makes in its own process (`action_write_locks`, one per task
action): between the separate ansible-playbook processes of warm runs (and
the background fork that builds payloads ahead) they lock nothing, and two
that build the same payload at once race on its `-part` file. Every build of
the warm runner's forks takes one lock on a file instead (`BuildLock`); from
2.19 on, Ansible locks each payload with a file of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

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

NAME = "shared-payload-cache"
CACHE_NAME = "ansiballz_cache"
SETTINGS = (
    "COLLECTIONS_PATHS",
    "DEFAULT_ROLES_PATH",
    "DEFAULT_MODULE_PATH",
    "DEFAULT_MODULE_UTILS_PATH",
    "DEFAULT_LOCAL_TMP",
)
RUNNER_PLAYBOOK = re.compile(r"[0-9a-f]{32}")
COLLECTION_SOURCES = ("plugins/modules", "plugins/module_utils")
ROLE_SOURCES = ("library", "module_utils")


def source_dirs(
    *,
    collection_roots: Iterable[str],
    roles_paths: Iterable[str],
    playbook: Path,
    module_paths: Iterable[str],
) -> list[Path]:
    """Every directory a module payload's files can come from."""
    dirs: list[Path] = [Path(p) for p in module_paths]
    for root in collection_roots:
        base = Path(root)
        if base.name != "ansible_collections":
            base = base / "ansible_collections"
        for collection in base.glob("*/*"):
            dirs += [collection / sub for sub in COLLECTION_SOURCES]
            for role in collection.glob("roles/*"):
                dirs += [role / sub for sub in ROLE_SOURCES]
    playbook_dir = playbook.parent
    dirs += [playbook_dir / sub for sub in ROLE_SOURCES]
    for roles_path in [*roles_paths, str(playbook_dir / "roles")]:
        for role in Path(roles_path).glob("*"):
            dirs += [role / sub for sub in ROLE_SOURCES]
    return dirs


def fingerprint(dirs: Iterable[Path], *, salt: bytes) -> str:
    digest = hashlib.sha256(salt)
    for directory in sorted(set(dirs)):
        for folder, subdirs, files in os.walk(directory):
            subdirs.sort()
            for name in sorted(files):
                path = Path(folder, name)
                with contextlib.suppress(OSError):
                    stat = path.stat()
                    digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def playbook_identity(playbook: Path) -> bytes | None:
    """What keeps one playbook's payloads apart from another's (role library
    modules share the name `ansible.legacy.<name>`): a role run's playbook,
    which ansible-runner writes anew for every run, by the roles it plays; any
    other playbook by its place and text. None if it cannot be read."""
    try:
        text = playbook.read_bytes()
    except OSError:
        return None
    generated = playbook.parent.name == "project" and RUNNER_PLAYBOOK.fullmatch(playbook.name)
    if generated:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            plays = json.loads(text)
            return roles_identity([str(r.get("name")) for play in plays for r in play["roles"]])
    return b"\0".join([str(playbook.resolve()).encode(), text])


def roles_identity(roles: list[str]) -> bytes:
    """`playbook_identity` of ansible-runner's playbook for these roles."""
    return ("roles:" + json.dumps(sorted(roles))).encode()


def probe() -> ForkCheck:
    """Ansible has the settings the fingerprint reads, and a payload it
    builds (in a fork: the build initialises the plugin loader) lands in
    DEFAULT_LOCAL_TMP/ansiballz_cache, where `install` links the shared one.
    The build takes a quarter of a second: the warm runner's start goes on
    beside it."""
    from ansible import constants

    missing = [name for name in SETTINGS if not hasattr(constants, name)]
    require(not missing, f"ansible.constants has no {', '.join(missing)}")

    def conclusion(failed: str) -> None:
        require(not failed, f"ansible no longer caches module payloads in {CACHE_NAME}: {failed}")

    return started_in_a_fork(_payload_built, conclusion)


def _payload_built() -> str:
    """In the fork: `_payload_built_in` a scratch directory that goes with the check."""
    with tempfile.TemporaryDirectory() as scratch:
        return _payload_built_in(Path(scratch))


PROBE_MODULE = "#!/usr/bin/python\nfrom ansible.module_utils.basic import AnsibleModule\n"


def _payload_built_in(scratch: Path) -> str:
    """Build a module's payload with DEFAULT_LOCAL_TMP in `scratch`: where it went."""
    from ansible import constants
    from ansible.executor.module_common import modify_module
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.template import Templar

    init_plugin_loader()
    constants.DEFAULT_LOCAL_TMP = str(scratch / "tmp")  # type: ignore[attr-defined]
    module = scratch / "probe_module.py"
    module.write_text(PROBE_MODULE)
    with contextlib.suppress(Exception):  # past the payload: the interpreter, irrelevant here
        modify_module(
            module_name=module.stem,
            module_path=str(module),
            module_args={},
            templar=Templar(loader=DataLoader()),
            task_vars={"ansible_python_interpreter": sys.executable},
            remote_is_local=True,
        )
    cache = scratch / "tmp" / CACHE_NAME
    built = [p for p in cache.glob("*") if not p.name.endswith((".lock", "-part"))]
    return "" if built else f"no payload in {cache} after a build"


def share_payload_cache(shared_root: Path, playbook: Path, identity: bytes | None = None) -> bool:
    """In a warm run's ansible-playbook, once its settings are read: link its
    payload cache to the shared one for its sources. True if that one holds
    payloads already (built by an earlier run, or ahead)."""
    import ansible
    from ansible import constants

    identity = identity if identity is not None else playbook_identity(playbook)
    if identity is None:
        return False  # ansible-playbook reports it
    dirs = source_dirs(
        collection_roots=constants.COLLECTIONS_PATHS,
        roles_paths=constants.DEFAULT_ROLES_PATH,
        playbook=playbook,
        module_paths=[*constants.DEFAULT_MODULE_PATH, *constants.DEFAULT_MODULE_UTILS_PATH],
    )
    shared = shared_root / fingerprint(dirs, salt=ansible.__version__.encode() + b"\0" + identity)
    shared.mkdir(mode=0o700, parents=True, exist_ok=True)
    local = Path(constants.DEFAULT_LOCAL_TMP) / CACHE_NAME
    if local.exists():
        return False
    local.symlink_to(shared, target_is_directory=True)
    return any(shared.iterdir())


class BuildLock:
    """A lock every process of the warm runner's takes to build a payload: a
    file lock (flock), held per entry, so that threads and processes alike
    wait for each other."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._held: list[int] = []

    def __enter__(self) -> BuildLock:
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        self._held.append(descriptor)
        return self

    def __exit__(self, *_exc: object) -> None:
        os.close(self._held.pop())  # closing releases the lock


class EveryActionLock(dict):  # type: ignore[type-arg]
    """action_write_locks as Ansible reads it: a lock for every action, the
    same one; the locks a strategy makes for its actions are not kept."""

    def __init__(self, lock: BuildLock) -> None:
        super().__init__()
        self.lock = lock

    def __contains__(self, _action: object) -> bool:
        return True

    def __getitem__(self, _action: object) -> BuildLock:
        return self.lock

    def __setitem__(self, _action: object, _lock: object) -> None:
        pass


def _lock_builds(context: Context) -> None:
    """In the warm runner, before anything forks from it (up to 2.18)."""
    try:
        from ansible.executor import action_write_locks
    except ImportError:
        return  # 2.19 on: each payload is locked by a file of Ansible's own
    root = context.scratch / "payloads"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    locks = EveryActionLock(BuildLock(root / "build.lock"))
    action_write_locks.action_write_locks = locks  # type: ignore[attr-defined]


def _share(context: Context) -> None:
    """In a run's ansible-playbook: the payloads of runs with its sources."""
    if context.playbook and share_payload_cache(context.scratch / "payloads", context.playbook):
        used(NAME)


ACCELERATION = Acceleration(
    name=NAME,
    saves="half the CPU of a warm reconcile: module payloads (AnsiballZ) built "
    "once for every run with the same sources",
    relies_on="module_common caches payloads in DEFAULT_LOCAL_TMP/ansiballz_cache",
    probe=probe,
    installs=(Install(Phase.WARM_RUNNER, _lock_builds), Install(Phase.PLAYBOOK, _share)),
)
