"""Where one object's runs keep what they need and what they leave.

    <root>/                                     (0700 when we make it)
    <root>/<group>/<version>/<Kind>/<namespace>/<name>/artifacts/<ident>/...
        (every level 0700; kept and rotated to maxRunnerArtifacts, redacted
        after the run: a person can open it and read what happened)
    <root>/.private/<128 random bits>/          (one run's private data dir, 0700)
        env/extravars  env/cluster_vars  env/envvars  env/cmdline   (0600)
        kubeconfig                                  (0600: the run's credential)
        inventory/hosts  (or a copy of ANSIBLE_INVENTORY)
        project/
    <root>/.operator.lock                       (held by each live operator using <root>)

A run's inputs (its credential among them) live in a directory of its own
whose name cannot be guessed from the object's, inside a directory its owner
may not list (0300), and go with the run: another run cannot find them by
the object's name. (A process of the operator's user may still read another
live run's environment in /proc; runs that must not trust each other need
operators of their own.)

An operator killed mid-run (SIGKILL, OOM, node loss) cannot remove its runs'
inputs: the next operator to `claim` the directory does, unless another live
operator shares it (their runs may be in flight).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.project.extravars_file import encode_author_vars
from ansible_operator.values.private_files import make_private_dirs, write_private

log = logging.getLogger("ansible_operator.runner")

PRIVATE = ".private"
LOCK = ".operator.lock"
ARTIFACTS = "artifacts"
DEFAULT_HOSTS = (
    "localhost ansible_connection=local ansible_python_interpreter={{ansible_playbook_python}}\n"
)


@dataclass(frozen=True)
class RunDir:
    path: Path  # the run's private data directory
    artifacts: Path  # the object's artifacts, kept across runs

    @property
    def extravars(self) -> Path:
        return self.path / "env" / "extravars"

    @property
    def cluster_vars(self) -> Path:
        return self.path / "env" / "cluster_vars"

    @property
    def envvars(self) -> Path:
        return self.path / "env" / "envvars"

    @property
    def cmdline(self) -> Path:
        return self.path / "env" / "cmdline"

    @property
    def kubeconfig(self) -> Path:
        return self.path / "kubeconfig"

    @property
    def inventory(self) -> Path:
        return self.path / "inventory"

    def secrets(self) -> list[Path]:
        return [self.extravars, self.cluster_vars, self.envvars, self.kubeconfig]


def object_dir(root: Path, group: str, version: str, kind: str, namespace: str, name: str) -> Path:
    parts = [group or "core", version, kind, namespace or "_cluster", name]
    return root.joinpath(*(part.replace("/", "_") for part in parts))


def private_root(root: Path) -> Path:
    """Where the runs under `root` keep their private data directories."""
    return root / PRIVATE


@dataclass(frozen=True)
class RunInputs:
    """What one run's private directory holds (runner/configuration.py decides it)."""

    extravars: dict[str, Any]  # the author's, written as JSON
    envvars: dict[str, str]  # ansible-runner's env/envvars (the proxy grant's)
    cluster_vars: bytes | None = None  # the cluster's data, a file of its own
    kubeconfig: dict[str, Any] | None = None  # the run's credential
    ansible_args: str = ""
    inventory: Path | None = None  # the operator's (--inventory), else localhost
    interpreter: Path | None = None  # the Python the default inventory names for modules


def new_name() -> str:
    """A run's private directory's name: 128 random bits."""
    return secrets.token_hex(16)


def run_dir_of(path: Path, private: Path, name: str) -> RunDir:
    """The run directory named `name` of the object whose directory is `path`,
    its inputs under `private` (private_root)."""
    return RunDir(private / name, path / ARTIFACTS)


def prepare(
    path: Path,
    *,
    extravars: dict[str, Any],
    envvars: dict[str, str],
    cluster_vars: bytes | None = None,
    kubeconfig: dict[str, Any] | None,
    ansible_args: str = "",
    inventory: Path | None = None,
    interpreter: Path | None = None,
    private: Path | None = None,
) -> RunDir:
    """Write the inputs of one run of the object whose directory is `path`,
    in a new private directory under `private` (default: beside `path`)."""
    private = private if private is not None else path.parent / PRIVATE
    run_dir = run_dir_of(path, private, new_name())
    inputs = RunInputs(
        extravars=extravars,
        envvars=envvars,
        cluster_vars=cluster_vars,
        kubeconfig=kubeconfig,
        ansible_args=ansible_args,
        inventory=inventory,
        interpreter=interpreter,
    )
    write(run_dir, inputs)
    return run_dir


def write(run_dir: RunDir, inputs: RunInputs) -> None:
    """Make `run_dir` (its object's artifacts directory, its private
    directory) and write `inputs` there. Secrets are written 0600 in a 0700
    tree. Raises ValueError for ansible_args that do not parse."""
    path, private = run_dir.artifacts.parent, run_dir.path.parent
    make_private_dirs(run_dir.artifacts)
    for directory in (path, path.parent):
        with contextlib.suppress(OSError):
            directory.chmod(0o700)
    make_private_dirs(private)
    private.chmod(0o300)  # its owner may enter a run's directory, not list them
    run_dir.path.mkdir(mode=0o700)
    (run_dir.path / "env").mkdir(mode=0o700)
    (run_dir.path / "project").mkdir(mode=0o700)
    write_private(run_dir.extravars, encode_author_vars(inputs.extravars))
    ansible_args, envvars = inputs.ansible_args, inputs.envvars
    if inputs.cluster_vars is not None:
        # project/extravars_file.py: the cluster's data, a file of its own; ansible-runner
        # passes env/extravars, and env/cmdline comes first on its command line.
        write_private(run_dir.cluster_vars, inputs.cluster_vars)
        given = f"-e @{shlex.quote(str(run_dir.cluster_vars))}"
        ansible_args = f"{given} {ansible_args}".strip()
    if inputs.kubeconfig is not None:
        from ansible_operator.kube.kubeconfig import write_kubeconfig

        write_kubeconfig(run_dir.kubeconfig, inputs.kubeconfig)
        envvars = {
            **envvars,
            "K8S_AUTH_KUBECONFIG": str(run_dir.kubeconfig),
            "KUBECONFIG": str(run_dir.kubeconfig),
        }
    write_private(run_dir.envvars, json.dumps(envvars).encode())
    if ansible_args:
        # Validate the quoting now, so a bad --ansible-args fails clearly here.
        shlex.split(ansible_args)
        write_private(run_dir.cmdline, ansible_args.encode())
    _write_inventory(run_dir, inputs.inventory, inputs.interpreter)


def _write_inventory(run_dir: RunDir, inventory: Path | None, interpreter: Path | None) -> None:
    if run_dir.inventory.exists():
        shutil.rmtree(run_dir.inventory)
    if inventory is None:
        run_dir.inventory.mkdir(mode=0o700)
        hosts = DEFAULT_HOSTS
        if interpreter is not None:
            hosts = hosts.replace("{{ansible_playbook_python}}", str(interpreter))
        (run_dir.inventory / "hosts").write_text(hosts)
    elif inventory.is_dir():
        shutil.copytree(inventory, run_dir.inventory)
    else:
        run_dir.inventory.mkdir(mode=0o700)
        shutil.copy(inventory, run_dir.inventory / inventory.name)


@dataclass
class RunnerDirClaim:
    """This process's use of a runner directory: a shared lock, held until released."""

    root: Path
    lock: int | None  # the lock file's descriptor (None: the file system has no locks)
    removed: int = 0  # private run directories of earlier operators removed

    def release(self) -> None:
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None


def claim(root: Path) -> RunnerDirClaim:
    """Take `root` for this process's runs: make it (0700) if missing and, when
    no other live operator uses it, remove what runs of earlier ones left
    there (their private directories: kubeconfigs, extra vars, inputs) and
    make the directories above the artifacts 0700. Artifacts stay, as
    retention keeps them. Every operator holds a shared lock on <root>/LOCK
    for its life (the kernel drops it when the process dies, SIGKILL too);
    the sweep needs it exclusive, so it never takes a live operator's inputs."""
    make_private_dirs(root)
    fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.warning(
            "runner directory shared with another live operator: what earlier runs left "
            "there is not removed runner_dir=%s",
            root,
        )
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits while another one sweeps
        return RunnerDirClaim(root, fd)
    except OSError as error:
        os.close(fd)
        log.warning(
            "runner directory cannot be locked, so what earlier runs left there is not "
            "removed runner_dir=%s error=%s",
            root,
            error,
        )
        return RunnerDirClaim(root, None)
    try:
        removed = sweep(root)
    finally:
        fcntl.flock(fd, fcntl.LOCK_SH)
    if removed:
        log.warning(
            "removed the private directories of runs an earlier operator did not finish "
            "runner_dir=%s runs=%d",
            root,
            removed,
        )
    return RunnerDirClaim(root, fd, removed)


def sweep(root: Path) -> int:
    """Remove every private directory of runs under `root` (no run may be in
    flight there) and make every directory above the artifacts 0700 (an older
    operator made some 0755). Returns how many runs' directories went."""
    removed = 0
    for folder, directories, _files in os.walk(root):
        here = Path(folder)
        if PRIVATE in directories:
            removed += _remove_private(here / PRIVATE)
        # Artifacts are kept (retention rotates them) and were made private when redacted.
        directories[:] = [d for d in directories if d not in (PRIVATE, ARTIFACTS)]
        for name in directories:
            with contextlib.suppress(OSError):
                (here / name).chmod(0o700)
    return removed


def _remove_private(private: Path) -> int:
    with contextlib.suppress(OSError):
        private.chmod(0o700)  # 0300 may not be listed, nor emptied
    try:
        runs = sum(1 for entry in private.iterdir() if entry.is_dir())
    except OSError:
        runs = 0
    shutil.rmtree(private, ignore_errors=True)
    return runs


def remove_secrets(run_dir: RunDir) -> None:
    """The run's private directory goes with the run: its inputs, its credential."""
    for path in run_dir.secrets():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    shutil.rmtree(run_dir.path, ignore_errors=True)
