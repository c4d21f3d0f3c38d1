"""How often each warm-runner acceleration was used, across processes.

An acceleration is used in processes the warm runner forks (a run's
ansible-playbook, Ansible's task workers, module runs), which end with
`os._exit`: nothing they count in memory survives them. So the counters live
in one small file made by the warm runner before its first fork: a header
naming the counters, then one 8-byte slot per name. A process adds to its
slot under a POSIX record lock on that slot alone; the operator reads the
file whenever it reports (metrics, `doctor`, tests).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path

HITS_FILE = "acceleration-hits"  # in the warm runner's scratch directory
HEADER_SIZE = 4096
SLOT = 8


class HitCounters:
    def __init__(self, path: Path, names: tuple[str, ...]) -> None:
        self.path = path
        self.names = names
        self._slots = {name: HEADER_SIZE + index * SLOT for index, name in enumerate(names)}
        self._fd: int | None = None
        self._lock = threading.Lock()
        # A fork made while another thread was counting must not inherit the
        # lock held (Ansible forks task workers while its result thread runs).
        os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    @classmethod
    def create(cls, path: Path, names: Iterable[str]) -> HitCounters:
        listed = tuple(names)
        header = json.dumps(list(listed)).encode()
        if len(header) >= HEADER_SIZE:
            raise ValueError("too many counters for the header")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, header.ljust(HEADER_SIZE, b"\0") + bytes(SLOT * len(listed)))
        finally:
            os.close(fd)
        counters = cls(path, listed)
        counters._descriptor()  # opened once here, shared by every fork
        return counters

    @classmethod
    def open(cls, path: Path) -> HitCounters:
        header = path.read_bytes()[:HEADER_SIZE].rstrip(b"\0")
        return cls(path, tuple(json.loads(header)))

    def forget_descriptor(self) -> None:
        """After something closed every descriptor of this process (its
        number may be reused for another file by now)."""
        self._fd = None

    def count(self, name: str, amount: int = 1) -> None:
        offset = self._slots.get(name)
        if offset is None:
            return
        with self._lock, contextlib.suppress(OSError):
            fd = self._descriptor()
            fcntl.lockf(fd, fcntl.LOCK_EX, SLOT, offset)
            try:
                current = int.from_bytes(os.pread(fd, SLOT, offset) or b"\0", "little")
                os.pwrite(fd, (current + amount).to_bytes(SLOT, "little"), offset)
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, SLOT, offset)

    def reset(self) -> None:
        """Every counter back to zero, in place (forks keep their descriptor)."""
        with self._lock:
            fd = self._descriptor()
            os.pwrite(fd, bytes(SLOT * len(self.names)), HEADER_SIZE)

    def read(self) -> dict[str, int]:
        data = self.path.read_bytes()
        return {
            name: int.from_bytes(data[offset : offset + SLOT] or b"\0", "little")
            for name, offset in self._slots.items()
        }

    def _descriptor(self) -> int:
        # A fork shares the parent's descriptor, which is fine for pread and
        # pwrite; after forget_descriptor() it is opened again.
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        return self._fd


_counters: HitCounters | None = None


def use(counters: HitCounters | None) -> None:
    """This process (and what it forks from now on) counts into `counters`."""
    global _counters
    _counters = counters


def count(name: str, amount: int = 1) -> None:
    if _counters is not None:
        _counters.count(name, amount)


def forget_descriptor() -> None:
    if _counters is not None:
        _counters.forget_descriptor()
