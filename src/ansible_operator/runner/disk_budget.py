"""A cap on the runner directory's bytes and files: the oldest artifacts go first.

    budget = DiskBudget(root, Limits(max_bytes=2**30, max_files=50_000))
    budget.rescan()                   the whole directory walked: the tally from scratch
                                      (at start, then now and then: see RESCAN_INTERVAL)
    budget.begin(ident, artifacts)    a run's directories made: from now on in flight
    budget.reserve(ident, inputs)     as it starts: room held for its inputs and what
    budget.prune()                    it will write, made by pruning the oldest artifacts
    budget.settle(artifacts, ident)   after it: no longer in flight, its subject's
                                      artifacts listed again (the run's measured),
    budget.prune()                    and pruned to the cap again

Usage is what the disk gives: a file or directory is one inode ("file") and
its allocated blocks ("bytes"), as `du` and the kubelet's ephemeral-storage
accounting count them. The tally is kept as runs end, so no run walks more
than its own subject's artifacts; a full walk happens only in `rescan`.

What is pruned, in this order, until the tally and the room held for runs in
flight fit both limits:

1. artifact directories that are not their subject's newest, oldest first
   (a user opens the last run of an object; older ones are history);
2. only if that is not enough, the newest ones too, those whose run is the
   oldest first: objects not reconciled for longest, deleted ones among them.

Never the artifacts of a run in flight, nor the artifacts directory it will
write to (even empty), and never anything but artifact directories: a run's inputs live under
`.private/`, which this module does not touch. A subject left with no
artifact goes with its empty directories.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import shutil
import stat
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ARTIFACTS = "artifacts"  # runner/rundir.py's: <subject>/artifacts/<ident>
PRIVATE = ".private"  # runs' inputs: never counted as artifacts, never pruned
RESCAN_INTERVAL = 600.0  # seconds between full walks, to undo drift (files others wrote)
RECENT_RUNS = 32  # runs whose size predicts the next one's


@dataclass(frozen=True)
class Usage:
    bytes: int = 0
    files: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.bytes + other.bytes, self.files + other.files)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.bytes - other.bytes, self.files - other.files)


@dataclass(frozen=True)
class Limits:
    max_bytes: int | None = None  # None: no cap
    max_files: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.max_bytes is None and self.max_files is None

    def exceeded_by(self, usage: Usage) -> str | None:
        """Which limit `usage` is over ("size" or "files"), None when it fits."""
        if self.max_bytes is not None and usage.bytes > self.max_bytes:
            return "size"
        if self.max_files is not None and usage.files > self.max_files:
            return "files"
        return None


def entry_usage(status: os.stat_result) -> Usage:
    return Usage(status.st_blocks * 512, 1)


def measure(path: Path) -> Usage:
    """`path` and everything under it (links not followed); 0 if it is gone."""
    try:
        status = path.lstat()
    except OSError:
        return Usage()
    total = entry_usage(status)
    folders = [path] if stat.S_ISDIR(status.st_mode) else []
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        total += entry_usage(entry.stat(follow_symlinks=False))
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(Path(entry.path))
        except OSError:
            continue
    return total


@dataclass
class Artifact:
    """One run's artifact directory, as the tally knows it."""

    path: Path  # <root>/<subject>/artifacts/<ident>
    time: float  # when its run ended (its mtime, when found by a rescan)
    usage: Usage
    seq: int = 0  # tells this record from an older one of the same path in the heaps

    @property
    def ident(self) -> str:
        return self.path.name

    @property
    def subject(self) -> Path:
        """Its subject's artifacts directory."""
        return self.path.parent


@dataclass
class Pruned:
    """What one `prune` removed, and why."""

    reason: str | None = None  # "size" or "files": the limit that was exceeded
    artifacts: list[Artifact] = field(default_factory=list)
    freed: Usage = Usage()
    newest: int = 0  # of `artifacts`, how many were their subject's newest
    still_over: bool = False  # nothing more could go (runs in flight hold the rest)


class DiskBudget:
    """The runner directory's tally and the pruning that keeps it under `limits`.
    Thread-safe: the host calls it from worker threads."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.limits = limits
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._artifacts: dict[Path, Artifact] = {}
        self._subjects: dict[Path, dict[str, Artifact]] = {}
        self._older: list[tuple[float, int, Path]] = []  # not their subject's newest
        self._latest: list[tuple[float, int, Path]] = []  # their subject's newest
        self._artifact_usage = Usage()
        self._other = Usage()  # directories above the artifacts, inputs, the lock file
        self._dirs: set[Path] = set()  # the directories above the artifacts counted in _other
        self._reserved: dict[str, Usage] = {}  # room held for each run in flight
        # Runs in flight and the artifacts directory each writes to. Their own lock,
        # held only for an instant or one removal: `begin` is called on the event loop.
        self._flight_lock = threading.Lock()
        self._in_flight: dict[str, Path] = {}
        self._recent: deque[Usage] = deque(maxlen=RECENT_RUNS)
        self._touched: set[Path] | None = None  # subjects runs changed during a rescan's walk

    # ----- what the tally says --------------------------------------------------
    @property
    def usage(self) -> Usage:
        """The runner directory as the tally knows it (room held not included)."""
        return self._artifact_usage + self._other

    @property
    def reserved(self) -> Usage:
        return sum(self._reserved.values(), Usage())

    def artifacts(self) -> list[Artifact]:
        """Every artifact directory the tally knows, oldest first."""
        with self._lock:
            return sorted(self._artifacts.values(), key=lambda artifact: artifact.time)

    def expected_run(self) -> Usage:
        """What the next run's artifacts are expected to take: the largest of
        the recent runs' (a run's size is its role's, much the same each time)."""
        if not self._recent:
            return Usage()
        return Usage(
            max(usage.bytes for usage in self._recent),
            max(usage.files for usage in self._recent),
        )

    # ----- the full walk ----------------------------------------------------------
    def rescan(self) -> Usage:
        """Walk the whole runner directory: the tally from scratch. The walk holds
        no lock, so runs end and prune meanwhile: the subjects they touched are
        listed again once it is done. The artifacts of runs in flight are
        counted as found (their run settles them again)."""
        with self._lock:
            self._touched = set()
        try:
            other, dirs, found = self._walk()
        finally:
            with self._lock:
                touched, self._touched = self._touched or set(), None
        with self._lock:
            self._clear()
            self._other, self._dirs = other, dirs
            for artifact in found:
                self._add(artifact)
            in_flight = self._in_flight_idents()
            for subject in touched:
                self._relist(subject, in_flight)
            if not self._recent and found:
                self._recent.extend(artifact.usage for artifact in found[-RECENT_RUNS:])
            return self.usage

    def _walk(self) -> tuple[Usage, set[Path], list[Artifact]]:
        """(what is not artifacts, the directories above them, the artifacts)."""
        other = measure_entry(self.root)
        dirs: set[Path] = set()
        found: list[Artifact] = []
        for folder, directories, files in os.walk(self.root):
            here = Path(folder)
            holds_artifacts = here.name == ARTIFACTS and PRIVATE not in here.parts
            for name in (*directories, *files):
                try:
                    status = os.lstat(here / name)
                except OSError:
                    continue
                if holds_artifacts and stat.S_ISDIR(status.st_mode):
                    found.append(Artifact(here / name, status.st_mtime, Usage()))
                    continue
                other += entry_usage(status)
                if stat.S_ISDIR(status.st_mode) and PRIVATE not in here.parts:
                    dirs.add(here / name)
            # An artifact directory is measured whole, as a run's end measures it.
            if holds_artifacts:
                directories[:] = []
        for artifact in found:
            artifact.usage = measure(artifact.path)
        return other, dirs, found

    # ----- a run -------------------------------------------------------------------
    def begin(self, ident: str, artifacts: Path) -> None:
        """Run `ident` will write to `artifacts`: neither goes until it `settle`s."""
        with self._flight_lock:
            self._in_flight[ident] = artifacts

    def reserve(self, ident: str, inputs: Usage = Usage()) -> Usage:
        """Hold room for run `ident` until `release`: its `inputs` (its private
        directory, which the tally does not count) and its artifacts to come."""
        with self._lock:
            room = self.expected_run() + inputs
            self._reserved[ident] = room
            return room

    def settle(self, subject: Path, ident: str) -> Usage:
        """After run `ident` of `subject` (its artifacts directory) ended: its room
        given back, the subject's artifact directories listed again (ansible-runner's
        and the host's rotation removed some), the run's measured. Returns the
        run's usage."""
        with self._lock:
            self._reserved.pop(ident, None)
            with self._flight_lock:
                self._in_flight.pop(ident, None)
            if self._touched is not None:
                self._touched.add(subject)
            return self._relist(subject, self._in_flight_idents(), ended=ident)

    def _in_flight_idents(self) -> set[str]:
        with self._flight_lock:
            return set(self._in_flight)

    def _relist(self, subject: Path, in_flight: set[str], ended: str | None = None) -> Usage:
        """The subject's artifacts as its directory lists them: those gone
        forgotten, new ones (and the `ended` run's, whole now) measured; those of
        runs in flight left to their run. Returns the `ended` run's usage."""
        try:
            names = {entry.name for entry in os.scandir(subject) if entry.is_dir()}
        except OSError:
            names = set()
        known = self._subjects.get(subject, {})
        if not known and names:
            self._count_dirs_up_to_root(subject)
        for gone in set(known) - names:
            self._forget(known[gone])
        run = Usage()
        for name in names:
            if name != ended and (name in known or name in in_flight):
                continue
            path = subject / name
            usage = measure(path)
            if name == ended:
                run = usage
                self._recent.append(usage)
            if name in known:
                self._forget(known[name])
            self._add(Artifact(path, time.time() if name == ended else _mtime(path), usage))
        return run

    # ----- pruning -----------------------------------------------------------------
    def prune(self) -> Pruned:
        """Remove the oldest artifacts until the tally plus the room held for
        runs in flight fits the limits; never those of a run in flight, nor
        the (maybe empty) artifacts directory one will write to."""
        with self._lock:
            pruned = Pruned(reason=self.limits.exceeded_by(self.usage + self.reserved))
            if pruned.reason is None:
                return pruned
            for heap, newest in ((self._older, False), (self._latest, True)):
                held: list[tuple[float, int, Path]] = []
                for item, artifact in self._oldest(heap, newest):
                    if self.limits.exceeded_by(self.usage + self.reserved) is None:
                        heapq.heappush(heap, item)
                        break
                    if not self._remove_unless_in_flight(artifact):
                        held.append(item)
                        continue
                    pruned.artifacts.append(artifact)
                    pruned.freed += artifact.usage
                    pruned.newest += newest
                for item in held:
                    heapq.heappush(heap, item)
            pruned.still_over = self.limits.exceeded_by(self.usage + self.reserved) is not None
            return pruned

    def _oldest(
        self, heap: list[tuple[float, int, Path]], newest: bool
    ) -> Iterator[tuple[tuple[float, int, Path], Artifact]]:
        """Pop the heap's valid records, oldest first. A record is stale once its
        artifact is gone, or when it is (no longer) its subject's newest."""
        while heap:
            item = heapq.heappop(heap)
            artifact = self._artifacts.get(item[2])
            if artifact is None or artifact.seq != item[1]:
                continue
            is_newest = self._newest_of(artifact.subject) is artifact
            if is_newest != newest:
                if is_newest:  # it became the newest: phase 2's
                    heapq.heappush(self._latest, item)
                continue
            yield item, artifact

    # ----- the tally's bookkeeping ----------------------------------------------------
    def _count_dirs_up_to_root(self, directory: Path) -> None:
        """A new subject's directories, and those above it no other subject had."""
        while directory != self.root and self.root in directory.parents:
            if directory in self._dirs:
                return
            self._dirs.add(directory)
            self._other += measure_entry(directory)
            directory = directory.parent

    def _clear(self) -> None:
        self._artifacts.clear()
        self._subjects.clear()
        self._older.clear()
        self._latest.clear()
        self._artifact_usage = Usage()
        self._other = Usage()
        self._dirs.clear()

    def _newest_of(self, subject: Path) -> Artifact | None:
        artifacts = self._subjects.get(subject)
        if not artifacts:
            return None
        return max(artifacts.values(), key=lambda artifact: (artifact.time, artifact.seq))

    def _add(self, artifact: Artifact) -> None:
        if len(self._older) + len(self._latest) > 2 * len(self._artifacts) + 1024:
            self._compact()
        artifact.seq = next(self._seq)
        previous = self._newest_of(artifact.subject)
        self._artifacts[artifact.path] = artifact
        self._subjects.setdefault(artifact.subject, {})[artifact.ident] = artifact
        self._artifact_usage += artifact.usage
        item = (artifact.time, artifact.seq, artifact.path)
        if previous is None or (artifact.time, artifact.seq) > (previous.time, previous.seq):
            heapq.heappush(self._latest, item)
            if previous is not None:
                heapq.heappush(self._older, (previous.time, previous.seq, previous.path))
        else:
            heapq.heappush(self._older, item)

    def _compact(self) -> None:
        """The heaps rebuilt from the tally: records go stale as artifacts are
        rotated and become older, and are dropped only when popped."""
        self._older.clear()
        self._latest.clear()
        for subject in self._subjects:
            newest = self._newest_of(subject)
            for artifact in self._subjects[subject].values():
                heap = self._latest if artifact is newest else self._older
                heap.append((artifact.time, artifact.seq, artifact.path))
        heapq.heapify(self._older)
        heapq.heapify(self._latest)

    def _forget(self, artifact: Artifact) -> None:
        if self._artifacts.get(artifact.path) is not artifact:
            return
        del self._artifacts[artifact.path]
        self._artifact_usage -= artifact.usage
        subject = self._subjects.get(artifact.subject, {})
        subject.pop(artifact.ident, None)
        if not subject:
            self._subjects.pop(artifact.subject, None)

    def _remove_unless_in_flight(self, artifact: Artifact) -> bool:
        """Remove `artifact`, and its subject's directories if it was the last,
        unless its run is in flight. A run beginning meanwhile waits for it."""
        with self._flight_lock:
            if artifact.ident in self._in_flight:
                return False
            shutil.rmtree(artifact.path, ignore_errors=True)
            self._forget(artifact)
            if self._touched is not None:
                self._touched.add(artifact.subject)
            busy = artifact.subject in self._in_flight.values()
            if artifact.subject not in self._subjects and not busy:
                self._other -= self._remove_empty_dirs(artifact.subject)
        return True

    def _remove_empty_dirs(self, directory: Path) -> Usage:
        """A subject with no artifact left: its empty directories go, up to the root."""
        freed = Usage()
        while directory != self.root and self.root in directory.parents:
            try:
                usage = measure_entry(directory)
                directory.rmdir()
            except OSError:
                break
            if directory in self._dirs:
                self._dirs.discard(directory)
                freed += usage
            directory = directory.parent
        return freed


def measure_entry(path: Path) -> Usage:
    """`path` alone (one inode), not what is under it."""
    try:
        return entry_usage(path.lstat())
    except OSError:
        return Usage()


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return time.time()
