"""Up to ansible-core 2.18 Ansible locks a payload's build with locks of its
own process: the warm runner's forks (each run's ansible-playbook, the
background fork building payloads ahead) take one lock on a file instead,
so two of them never build into the shared cache at once. Real forks."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ansible_operator.runner.warm.accelerations.shared_payload_cache import (
    BuildLock,
    EveryActionLock,
)


def test_every_action_gets_the_one_lock_and_a_strategys_locks_are_not_kept(
    tmp_path: Path,
) -> None:
    locks = EveryActionLock(BuildLock(tmp_path / "build.lock"))
    locks["kubernetes.core.k8s"] = object()  # as a strategy adds one for its action
    assert "kubernetes.core.k8s" in locks and None in locks
    assert locks["kubernetes.core.k8s"] is locks[None] is locks.lock


def test_processes_building_at_once_wait_for_each_other(tmp_path: Path) -> None:
    """Each fork holds the lock while it writes its `-part` file and renames
    it, as Ansible 2.18 builds a payload: none finds another's `-part` gone."""
    lock = BuildLock(tmp_path / "build.lock")
    payload = tmp_path / "ansible.modules.greet-ZIP_DEFLATED"
    log = tmp_path / "log"
    children = []
    for number in range(4):
        child = os.fork()
        if child == 0:
            code = 1
            try:
                with lock:
                    with log.open("a") as out:
                        out.write(f"in {number}\n")
                    part = Path(f"{payload}-part")
                    part.write_text(str(number))
                    time.sleep(0.05)  # the build takes a while: others would overwrite it
                    part.rename(payload)
                    with log.open("a") as out:
                        out.write(f"out {number}\n")
                code = 0
            finally:
                os._exit(code)
        children.append(child)
    codes = [os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) for child in children]
    assert codes == [0, 0, 0, 0]
    lines = log.read_text().splitlines()
    # Each build's in and out next to each other: never two builds at once.
    assert len(lines) == 8
    assert all(
        entered == f"in {left.split()[1]}" and left.startswith("out ")
        for entered, left in zip(lines[0::2], lines[1::2], strict=True)
    )
