"""The runner directory: every directory we make there is 0700, and what runs
of a killed operator left there (their private inputs and credential) is
removed by the next operator to claim it, unless a live operator shares it.
Against a real operator: tests/security/test_runner_dir_attacks.py."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from ansible_operator.runner import rundir
from ansible_operator.values.private_files import make_private_dirs


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def open_to_others(root: Path) -> list[str]:
    """Directories under `root` (itself included) that group or others may enter or list."""
    found = []
    for folder, _dirs, _files in os.walk(root):
        if mode(Path(folder)) & 0o077:
            found.append(f"{folder}: {oct(mode(Path(folder)))}")
    return found


def killed_run(root: Path) -> rundir.RunDir:
    """The inputs of a run as an operator killed mid-run leaves them."""
    subject = rundir.object_dir(root, "cache.example.com", "v1", "Memcached", "team", "mc")
    run_dir = rundir.prepare(
        subject,
        extravars={"size": 3},
        cluster_vars=b'# the cluster\'s data\n!unsafe\n"name": "mc"\n',
        envvars={"PROXY_TOKEN": "t0ken"},
        kubeconfig={"apiVersion": "v1", "kind": "Config", "users": [{"name": "run"}]},
        private=rundir.private_root(root),
    )
    (run_dir.artifacts / "1-finished").mkdir(mode=0o700)  # as redaction leaves it
    (run_dir.artifacts / "1-finished" / "stdout").write_text("ok=1\n")
    return run_dir


def test_every_directory_a_run_makes_is_private_from_the_runner_dir_down(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    usual = os.umask(0o022)  # with it, mkdir -p makes each level 0755
    try:
        run_dir = killed_run(root)
    finally:
        os.umask(usual)
    assert open_to_others(root) == []
    assert mode(rundir.private_root(root)) == 0o300
    for secret in run_dir.secrets():
        assert mode(secret) == 0o600, secret
    # The cluster's data reaches ansible-playbook as a file of its own (`-e @FILE`).
    assert run_dir.cmdline.read_text() == f"-e @{run_dir.cluster_vars}"


def test_make_private_dirs_leaves_an_existing_directory_as_its_owner_made_it(
    tmp_path: Path,
) -> None:
    tmp_path.chmod(0o755)
    make_private_dirs(tmp_path / "a" / "b")
    assert (mode(tmp_path), mode(tmp_path / "a"), mode(tmp_path / "a" / "b")) == (
        0o755,
        0o700,
        0o700,
    )


def test_a_killed_operators_run_inputs_go_at_the_next_claim_and_its_artifacts_stay(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    left = killed_run(root)
    left.path.parent.parent.parent.chmod(0o755)  # as an older operator made the top levels
    claim = rundir.claim(root)
    try:
        assert claim.removed == 1
        assert not left.path.exists() and not left.kubeconfig.exists()
        assert (left.artifacts / "1-finished" / "stdout").read_text() == "ok=1\n"
        assert open_to_others(root) == []
    finally:
        claim.release()


def test_a_runner_dir_a_live_operator_shares_keeps_its_runs_inputs(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    live = killed_run(root)
    other = os.open(root / rundir.LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_SH)  # another live operator, in flight
    try:
        claim = rundir.claim(root)
        claim.release()
        assert claim.removed == 0 and live.kubeconfig.exists()
    finally:
        os.close(other)
    claim = rundir.claim(root)  # it is gone now
    claim.release()
    assert claim.removed == 1 and not live.kubeconfig.exists()


def test_the_runner_dir_is_made_private_when_we_make_it(tmp_path: Path) -> None:
    claim = rundir.claim(tmp_path / "new" / "runs")
    claim.release()
    assert (mode(tmp_path / "new"), mode(tmp_path / "new" / "runs")) == (0o700, 0o700)
