"""The runner directory's cap (runner/disk_budget.py), on a real directory:
the oldest artifacts go first, never a run in flight's, each object's newest last."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import pytest

from ansible_operator.commands.run import add_run_arguments
from ansible_operator.runner.disk_budget import DiskBudget, Limits, Usage, measure
from ansible_operator.settings.flags import settings_from


def subject(root: Path, name: str) -> Path:
    """An object's artifacts directory, laid out as runner/rundir.py lays it out."""
    return root / "test.example.com" / "v1" / "Greeting" / "ns" / name / "artifacts"


def write_run(artifacts: Path, ident: str, *, at: float, size: int = 4096) -> Path:
    """What a run leaves: a directory of a few files, dated `at`."""
    run = artifacts / ident
    (run / "job_events").mkdir(parents=True)
    for index in range(3):
        (run / "job_events" / f"{index}.json").write_bytes(b"x" * size)
    os.utime(run, (at, at))
    return run


def budget_over(root: Path, *, max_bytes: int | None = None, max_files: int | None = None):
    budget = DiskBudget(root, Limits(max_bytes, max_files))
    budget.rescan()
    return budget


def left(root: Path) -> set[str]:
    return {path.parent.parent.name + "/" + path.name for path in root.glob("**/artifacts/*")}


def one_run(root: Path) -> Usage:
    return measure(next(root.glob("**/artifacts/*")))


def test_the_tally_after_a_rescan_is_what_the_directory_holds(tmp_path: Path) -> None:
    for index, name in enumerate(["a", "b", "c"]):
        write_run(subject(tmp_path, name), f"{index}-run", at=1000 + index)
    inputs = tmp_path / ".private" / "0123abcd"
    inputs.mkdir(parents=True)
    (inputs / "extravars").write_text("{}")
    budget = budget_over(tmp_path)
    assert budget.usage == measure(tmp_path)
    assert len(budget.artifacts()) == 3


def test_the_oldest_artifacts_go_first_across_objects(tmp_path: Path) -> None:
    write_run(subject(tmp_path, "a"), "a1", at=1000)
    write_run(subject(tmp_path, "b"), "b1", at=1001)
    write_run(subject(tmp_path, "a"), "a2", at=1002)
    write_run(subject(tmp_path, "b"), "b2", at=1003)
    write_run(subject(tmp_path, "a"), "a3", at=1004)
    write_run(subject(tmp_path, "b"), "b3", at=1005)
    run = one_run(tmp_path)
    whole = measure(tmp_path)
    budget = budget_over(tmp_path, max_files=whole.files - 2 * run.files)
    pruned = budget.prune()
    assert [artifact.ident for artifact in pruned.artifacts] == ["a1", "b1"]
    assert pruned.reason == "files"
    assert pruned.freed == Usage(2 * run.bytes, 2 * run.files)
    assert left(tmp_path) == {"a/a2", "a/a3", "b/b2", "b/b3"}
    assert budget.usage == measure(tmp_path)


def test_each_objects_newest_artifact_stays_while_older_ones_of_others_can_go(
    tmp_path: Path,
) -> None:
    write_run(subject(tmp_path, "quiet"), "q1", at=500)  # the oldest, and quiet's last run
    for index in range(3):
        write_run(subject(tmp_path, "busy"), f"b{index}", at=1000 + index)
    run = one_run(tmp_path)
    budget = budget_over(tmp_path, max_files=measure(tmp_path).files - run.files)
    pruned = budget.prune()
    assert [artifact.ident for artifact in pruned.artifacts] == ["b0"]
    assert pruned.newest == 0
    assert left(tmp_path) == {"quiet/q1", "busy/b1", "busy/b2"}


def test_newest_artifacts_go_last_the_longest_quiet_object_first_with_its_directories(
    tmp_path: Path,
) -> None:
    write_run(subject(tmp_path, "gone"), "g1", at=500)  # e.g. an object deleted long ago
    write_run(subject(tmp_path, "recent"), "r1", at=900)
    write_run(subject(tmp_path, "busy"), "b1", at=1000)
    write_run(subject(tmp_path, "busy"), "b2", at=1001)
    run = one_run(tmp_path)
    # Room for all but one run: busy's older run goes, and still a newest must go.
    budget = budget_over(tmp_path, max_files=measure(tmp_path).files - run.files - 1)
    pruned = budget.prune()
    assert [artifact.ident for artifact in pruned.artifacts] == ["b1", "g1"]
    assert pruned.newest == 1
    assert left(tmp_path) == {"recent/r1", "busy/b2"}
    # The pruned object's empty directories went with its last artifacts.
    assert not subject(tmp_path, "gone").parent.exists()
    assert budget.usage == measure(tmp_path)


def test_artifacts_of_a_run_in_flight_are_never_pruned(tmp_path: Path) -> None:
    write_run(subject(tmp_path, "a"), "running", at=500)
    write_run(subject(tmp_path, "a"), "a2", at=1000)
    write_run(subject(tmp_path, "b"), "b1", at=1001)
    budget = budget_over(tmp_path, max_files=1)
    budget.begin("running", subject(tmp_path, "a"))
    pruned = budget.prune()
    assert left(tmp_path) == {"a/running"}
    assert pruned.still_over  # what is left is the running run's
    assert {artifact.ident for artifact in pruned.artifacts} == {"a2", "b1"}
    # Once it ended, its artifacts are like any other's.
    budget.settle(subject(tmp_path, "a"), "running")
    assert [artifact.ident for artifact in budget.prune().artifacts] == ["running"]


def test_the_size_cap_prunes_by_bytes(tmp_path: Path) -> None:
    write_run(subject(tmp_path, "a"), "big-old", at=1000, size=64 * 1024)
    write_run(subject(tmp_path, "a"), "small-new", at=1001, size=10)
    write_run(subject(tmp_path, "b"), "b1", at=1002, size=10)
    big = measure(subject(tmp_path, "a") / "big-old")
    budget = budget_over(tmp_path, max_bytes=measure(tmp_path).bytes - big.bytes // 2)
    pruned = budget.prune()
    assert pruned.reason == "size"
    assert [artifact.ident for artifact in pruned.artifacts] == ["big-old"]
    assert budget.usage.bytes <= budget.limits.max_bytes


def test_under_both_caps_nothing_goes(tmp_path: Path) -> None:
    write_run(subject(tmp_path, "a"), "a1", at=1000)
    write_run(subject(tmp_path, "a"), "a2", at=1001)
    whole = measure(tmp_path)
    pruned = budget_over(tmp_path, max_bytes=whole.bytes, max_files=whole.files).prune()
    assert pruned.reason is None
    assert pruned.artifacts == []
    assert left(tmp_path) == {"a/a1", "a/a2"}


def test_a_ended_run_is_counted_and_what_rotation_removed_forgotten(tmp_path: Path) -> None:
    artifacts = subject(tmp_path, "a")
    write_run(artifacts, "a1", at=1000)
    write_run(artifacts, "a2", at=1001)
    budget = budget_over(tmp_path)
    # The run a3 ended; ansible-runner's rotation removed a1 meanwhile.
    new = write_run(artifacts, "a3", at=1002, size=9000)
    shutil.rmtree(artifacts / "a1")
    run = budget.settle(artifacts, "a3")
    assert run == measure(new)
    assert budget.usage == measure(tmp_path)
    assert [artifact.ident for artifact in budget.artifacts()] == ["a2", "a3"]
    assert budget.expected_run().files >= run.files


def test_a_new_objects_directories_are_counted_when_its_first_run_ends(tmp_path: Path) -> None:
    write_run(subject(tmp_path, "a"), "a1", at=1000)
    budget = budget_over(tmp_path)
    elsewhere = tmp_path / "other.example.com" / "v2" / "Thing" / "ns2" / "new" / "artifacts"
    write_run(elsewhere, "n1", at=1001)
    budget.settle(elsewhere, "n1")
    assert budget.usage == measure(tmp_path)
    # Pruned whole, its directories go and the tally follows.
    budget.limits = Limits(max_files=measure(tmp_path).files - 1)
    write_run(subject(tmp_path, "a"), "a2", at=1002)
    budget.settle(subject(tmp_path, "a"), "a2")
    assert [artifact.ident for artifact in budget.prune().artifacts] == ["a1", "n1"]
    assert not (tmp_path / "other.example.com").exists()
    assert budget.usage == measure(tmp_path)


def test_the_directory_a_run_in_flight_writes_to_stays_even_empty(tmp_path: Path) -> None:
    write_run(subject(tmp_path, "a"), "a1", at=1000)
    budget = budget_over(tmp_path, max_files=1)
    budget.begin("a2", subject(tmp_path, "a"))
    budget.prune()
    assert subject(tmp_path, "a").is_dir()
    assert list(subject(tmp_path, "a").iterdir()) == []


def test_room_is_made_before_a_run_for_what_it_is_expected_to_write(tmp_path: Path) -> None:
    write_run(subject(tmp_path, "a"), "a1", at=1000)
    write_run(subject(tmp_path, "a"), "a2", at=1001)
    write_run(subject(tmp_path, "b"), "b1", at=1002)
    run = one_run(tmp_path)
    budget = budget_over(tmp_path, max_files=measure(tmp_path).files)
    assert budget.prune().artifacts == []  # at the cap, not over
    budget.begin("b2", subject(tmp_path, "b"))
    assert budget.reserve("b2") == run  # the largest recent run's
    pruned = budget.prune()
    assert [artifact.ident for artifact in pruned.artifacts] == ["a1"]
    # The run wrote what was expected: after it, the directory is at the cap again.
    write_run(subject(tmp_path, "b"), "b2", at=1003)
    budget.settle(subject(tmp_path, "b"), "b2")
    assert budget.prune().artifacts == []
    assert measure(tmp_path).files <= budget.limits.max_files


def test_runs_inputs_are_counted_but_never_pruned(tmp_path: Path) -> None:
    inputs = tmp_path / ".private" / "0123abcd"
    (inputs / "env").mkdir(parents=True)
    (inputs / "env" / "extravars").write_text("{}")
    (inputs / "artifacts").mkdir()  # named like artifacts, still a run's inputs
    write_run(subject(tmp_path, "a"), "a1", at=1000)
    budget = budget_over(tmp_path, max_files=1)
    budget.prune()
    assert (inputs / "env" / "extravars").exists()
    assert (inputs / "artifacts").exists()
    assert [artifact.ident for artifact in budget.artifacts()] == []


def test_many_runs_without_pruning_keep_the_tally_small(tmp_path: Path) -> None:
    artifacts = subject(tmp_path, "a")
    budget = budget_over(tmp_path)
    for index in range(3000):
        write_run(artifacts, f"r{index}", at=1000 + index, size=1)
        budget.settle(artifacts, f"r{index}")
        shutil.rmtree(artifacts / f"r{index}")  # rotated away by the next run
    budget.settle(artifacts, "none")
    assert budget.artifacts() == []
    assert len(budget._older) + len(budget._latest) < 2000  # stale records compacted


def parsed(*argv: str):
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return settings_from(parser.parse_args(list(argv)), {}).runs


def test_the_caps_are_flags_with_kubernetes_sizes_and_zero_for_none() -> None:
    runs = parsed("--runner-dir-max-size=200Ki", "--runner-dir-max-files=60")
    assert (runs.runner_dir_max_size, runs.runner_dir_max_files) == (200 * 1024, 60)
    runs = parsed("--runner-dir-max-size=0", "--runner-dir-max-files=0")
    assert (runs.runner_dir_max_size, runs.runner_dir_max_files) == (None, None)
    assert parsed().runner_dir_max_size == 2**30
    assert parsed().runner_dir_max_files == 50_000


@pytest.mark.parametrize("argv", [["--runner-dir-max-files=-1"], ["--runner-dir-max-size=lots"]])
def test_a_bad_cap_stops_at_its_flag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parsed(*argv)
    assert argv[0].split("=")[0] in capsys.readouterr().err


def test_a_run_that_ends_during_a_rescans_walk_is_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    artifacts = subject(tmp_path, "a")
    write_run(artifacts, "a1", at=1000)
    budget = budget_over(tmp_path)
    walk = budget._walk

    def walk_while_a_run_ends():
        scanned = walk()  # saw a1 only
        write_run(artifacts, "a2", at=1001)
        shutil.rmtree(artifacts / "a1")  # rotated away by the run's start
        budget.settle(artifacts, "a2")
        return scanned

    monkeypatch.setattr(budget, "_walk", walk_while_a_run_ends)
    budget.rescan()
    assert [artifact.ident for artifact in budget.artifacts()] == ["a2"]
    assert budget.usage == measure(tmp_path)
