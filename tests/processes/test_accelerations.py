"""Every warm-runner acceleration applies to the installed Ansible and is
really used (a silent loss of speed fails here); one that does not apply,
or is switched off, leaves the stock behaviour and the runs succeed.
Real ansible-runner and ansible-core, no cluster."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest
from warm_play import play_warm, start_warm

from ansible_operator.kube.kubeconfig import build_kubeconfig, write_kubeconfig
from ansible_operator.runner.receiver import EventReceiver
from ansible_operator.runner.result import RunResult
from ansible_operator.runner.warm import acceleration
from ansible_operator.runner.warm.acceleration import (
    Acceleration,
    Context,
    Install,
    Phase,
    Unavailable,
    Verdict,
)
from ansible_operator.runner.warm.accelerations import ACCELERATIONS, names
from ansible_operator.runner.warm.processes import WarmProcesses

# Used by forked task workers only (tests/processes/test_task_inline.py forks them).
FORKED_WORKERS_ONLY = {"worker-gc-freeze"}

# A task of each kind a role has: a fact, a template written to a file (an
# action that transfers a file: a temporary directory), a command, the role's
# own module and a debug message.
TASKS = """
- set_fact:
    greeting: "{{ 'hello ' ~ (number * 2) }}"
- copy:
    content: "{{ greeting }}\\n"
    dest: "{{ out_dir }}/greeting.txt"
- command: cat "{{ out_dir }}/greeting.txt"
  register: read_back
- greet:
    name: "{{ read_back.stdout }}"
  environment:
    K8S_AUTH_KUBECONFIG: "{{ kubeconfig }}"  # as a run's modules find their kubeconfig
  register: greeted
- debug:
    msg: "{{ greeted.greeting }}"
"""
# It imports a module_util of kubernetes.core and loads a kubeconfig, as the
# modules of most roles do.
MODULE = """
import os
import kubernetes.config
from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.hashes import sorted_dict
module = AnsibleModule(argument_spec={"name": {"type": "str"}})
kubernetes.config.load_kube_config(config_file=os.environ["K8S_AUTH_KUBECONFIG"])
greeting = sorted_dict({"text": "the role says " + module.params["name"]})["text"]
module.exit_json(changed=False, greeting=greeting)
"""
# Loaded before anything else by the warm runner's Python: zipimport's private
# compile function gets another signature (as a Python release could give it),
# which changes nothing for Python itself.
CHANGED_ZIPIMPORT = """
import zipimport
_original = zipimport._compile_source
def _compile_source(pathname, source, *, optimize=-1):
    return _original(pathname, source)
zipimport._compile_source = _compile_source
"""


@pytest.fixture
def role(tmp_path: Path) -> Path:
    root = tmp_path / "roles" / "greeter"
    (root / "tasks").mkdir(parents=True)
    (root / "library").mkdir()
    (root / "tasks" / "main.yml").write_text(TASKS)
    (root / "library" / "greet.py").write_text(MODULE)
    return root


def not_for_this_ansible() -> set[str]:
    """The accelerations made for newer ansible-core releases than the installed one."""
    here = tuple(int(part) for part in metadata.version("ansible-core").split(".")[:2])
    return {a.name for a in ACCELERATIONS if here < a.ansible_core_from}


async def start(tmp_path: Path, role: Path, switched_off: tuple[str, ...] = ()) -> WarmProcesses:
    return await start_warm(tmp_path / "scratch", {"role": str(role)}, switched_off)


async def run(
    receiver: EventReceiver,
    tmp_path: Path,
    role: Path,
    warm: WarmProcesses,
    number: int,
    greeting: str = "hello ",
) -> RunResult:
    out_dir = tmp_path / f"out-{number}"
    out_dir.mkdir()
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig",
        build_kubeconfig("https://kubernetes.invalid:6443", token="t", namespace="greeters"),
    )
    result, run_dir = await play_warm(
        receiver,
        warm,
        tmp_path / "runs" / str(number),
        role=role,
        extravars={"number": number, "out_dir": str(out_dir), "kubeconfig": str(kubeconfig)},
    )
    assert result.succeeded, result.message
    assert (out_dir / "greeting.txt").read_text() == f"{greeting}{number * 2}\n"
    stdout = (run_dir.artifacts / result.ident / "stdout").read_text()
    assert f"the role says {greeting}{number * 2}" in stdout
    return result


async def test_every_acceleration_applies_here_and_is_used(
    receiver: EventReceiver, tmp_path: Path, role: Path
) -> None:
    warm = await start(tmp_path, role)
    older = not_for_this_ansible()
    try:
        off = {name: v.why for name, v in warm.accelerations.items() if not v.on}
        assert set(off) == older, f"accelerations off on this Ansible: {off}"
        assert list(warm.accelerations) == list(names())
        # Two runs: the second finds what the first (and the prebuild) left.
        for number in (21, 4):
            await run(receiver, tmp_path, role, warm, number)
        unused = {name for name, count in warm.hits().items() if count == 0 and name not in older}
        # Workers are forked only for batches of several hosts once tasks run
        # in the playbook's process; the role's play has one.
        assert unused == FORKED_WORKERS_ONLY, f"on but never used: {unused} (hits: {warm.hits()})"
    finally:
        await warm.stop()


async def test_switched_off_accelerations_leave_the_stock_behaviour(
    receiver: EventReceiver, tmp_path: Path, role: Path
) -> None:
    warm = await start(tmp_path, role, switched_off=names())
    try:
        assert all(
            v == Verdict(False, acceleration.SWITCHED_OFF) for v in warm.accelerations.values()
        )
        assert warm.interpreter is None  # modules run under plain Python
        await run(receiver, tmp_path, role, warm, 5)
        assert set(warm.hits().values()) == {0}
    finally:
        await warm.stop()


async def test_a_role_edited_after_start_runs_as_edited(
    receiver: EventReceiver, tmp_path: Path, role: Path
) -> None:
    warm = await start(tmp_path, role)
    try:
        await run(receiver, tmp_path, role, warm, 3)
        parsed_before = warm.hits()["parsed-files-shared"]
        assert parsed_before > 0  # the run used the warm runner's parse of tasks/main.yml
        tasks = role / "tasks" / "main.yml"
        tasks.write_text(TASKS.replace("'hello '", "'hello, edited: '"))
        result = await run(receiver, tmp_path, role, warm, 5, greeting="hello, edited: ")
        stdout = (tmp_path / "runs" / "5" / "artifacts" / result.ident / "stdout").read_text()
        assert "the role says hello, edited: 10" in stdout
        assert warm.hits()["parsed-files-shared"] == parsed_before  # parsed by the run itself
    finally:
        await warm.stop()


async def test_a_changed_private_function_turns_off_only_its_acceleration(
    receiver: EventReceiver, tmp_path: Path, role: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CHANGED_ZIPIMPORT)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    )
    warm = await start(tmp_path, role)
    try:
        verdict = warm.accelerations["compiled-module-sources"]
        assert not verdict.on
        assert "zipimport._compile_source takes other arguments" in verdict.why
        off = {name for name, v in warm.accelerations.items() if not v.on}
        assert off - not_for_this_ansible() == {"compiled-module-sources"}
        await run(receiver, tmp_path, role, warm, 6)
        hits = warm.hits()
        assert hits["compiled-module-sources"] == 0
        assert hits["warm-module-interpreter"] > 0
    finally:
        await warm.stop()


@pytest.fixture
def fresh_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's verdicts and probed records, as in a warm process that
    probed only the test's own accelerations."""
    monkeypatch.setattr(acceleration, "_verdicts", {})
    monkeypatch.setattr(acceleration, "_probed", {})
    monkeypatch.setattr(acceleration, "_pending", {})


@pytest.mark.usefixtures("fresh_verdicts")
def test_a_failing_probe_leaves_only_its_acceleration_off() -> None:
    def missing() -> None:
        raise Unavailable("SomeClass.private_method is missing")

    def broken() -> None:
        raise KeyError("surprise")

    verdicts = acceleration.probe(
        [
            Acceleration("fine", "", "", lambda: None),
            Acceleration("gone", "", "", missing),
            Acceleration("crashing", "", "", broken),
            Acceleration("unwanted", "", "", lambda: None),
        ],
        switched_off=["unwanted"],
    )
    assert verdicts == {
        "fine": Verdict(True),
        "gone": Verdict(False, "SomeClass.private_method is missing"),
        "crashing": Verdict(False, "its probe failed: KeyError('surprise')"),
        "unwanted": Verdict(False, acceleration.SWITCHED_OFF),
    }
    assert acceleration.enabled("fine") and not acceleration.enabled("gone")


def _waits_for(path: Path, then: Path | None = None) -> Callable[[], str]:
    """A probe's check in a fork: marks `then`, then waits for `path` (not for ever)."""

    def check() -> str:
        if then is not None:
            then.touch()
        for _ in range(2000):
            if path.exists():
                return ""
            time.sleep(0.005)
        return f"{path.name} never appeared"

    return check


def _fork_probe(check: Callable[[], str]) -> Callable[[], acceleration.ForkCheck]:
    def conclusion(found: str) -> None:
        acceleration.require(not found, found)

    return lambda: acceleration.started_in_a_fork(check, conclusion)


@pytest.mark.usefixtures("fresh_verdicts")
def test_probes_checking_in_forks_check_side_by_side(tmp_path: Path) -> None:
    # Each check answers only once the other one has started: one after the
    # other, the first would wait in vain.
    first, second = tmp_path / "first", tmp_path / "second"
    verdicts = acceleration.probe(
        [
            Acceleration("first", "", "", _fork_probe(_waits_for(second, then=first))),
            Acceleration("second", "", "", _fork_probe(_waits_for(first, then=second))),
        ]
    )
    assert verdicts == {"first": Verdict(True), "second": Verdict(True)}


@pytest.mark.usefixtures("fresh_verdicts")
def test_a_pending_probe_holds_only_the_phases_it_installs_in(tmp_path: Path) -> None:
    release = tmp_path / "release"
    installed: list[str] = []
    late = Acceleration(
        "late",
        "",
        "",
        _fork_probe(_waits_for(release)),
        (Install(Phase.PLAYBOOK, lambda _context: installed.append("late")),),
    )
    early = Acceleration(
        "early",
        "",
        "",
        lambda: None,
        (Install(Phase.WARM_RUNNER, lambda _context: installed.append("early")),),
    )
    assert acceleration.probe([late, early], wait=False) == {"early": Verdict(True)}
    acceleration.install_phase(Phase.WARM_RUNNER, Context())  # would wait in vain for "late"
    assert installed == ["early"]
    release.touch()
    acceleration.settle()
    assert acceleration.verdict("late") == Verdict(True)
    acceleration.install_phase(Phase.PLAYBOOK, Context())
    assert installed == ["early", "late"]


@pytest.mark.usefixtures("fresh_verdicts")
def test_a_check_in_a_fork_that_finds_a_change_leaves_its_acceleration_off() -> None:
    verdicts = acceleration.probe(
        [Acceleration("changed", "", "", _fork_probe(lambda: "Strategy._queue_task is gone"))]
    )
    assert verdicts == {"changed": Verdict(False, "Strategy._queue_task is gone")}


@pytest.mark.usefixtures("fresh_verdicts")
def test_an_installer_that_raises_changes_nothing_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def install(_context: Context) -> None:
        raise AttributeError("no attribute '_private'")

    shaky = Acceleration("shaky", "", "", lambda: None, (Install(Phase.RUN, install),))
    acceleration.probe([shaky])
    acceleration.install_phase(Phase.RUN, Context())
    assert not acceleration.enabled("shaky")
    assert "acceleration shaky not used here" in capsys.readouterr().err


@pytest.mark.usefixtures("fresh_verdicts")
def test_each_phase_installs_what_is_on_and_has_what_it_needs() -> None:
    installed: list[tuple[str, Phase, Context]] = []

    def record(name: str, phase: Phase) -> Install:
        return Install(phase, lambda context: installed.append((name, phase, context)))

    helper = Acceleration("helper", "", "", lambda: None)
    records = [
        Acceleration("early", "", "", lambda: None, (record("early", Phase.WARM_RUNNER),)),
        Acceleration(
            "twice",
            "",
            "",
            lambda: None,
            (record("twice", Phase.WARM_RUNNER), record("twice", Phase.PLAYBOOK)),
        ),
        Acceleration("off", "", "", lambda: None, (record("off", Phase.WARM_RUNNER),)),
        Acceleration(
            "helped", "", "", lambda: None, (record("helped", Phase.PLAYBOOK),), ("helper",)
        ),
    ]
    acceleration.probe([helper, *records], switched_off=["off", "helper"])
    context = Context(scratch=Path("/scratch"))
    acceleration.install_phase(Phase.WARM_RUNNER, context)
    assert installed == [
        ("early", Phase.WARM_RUNNER, context),
        ("twice", Phase.WARM_RUNNER, context),
    ]
    installed.clear()
    acceleration.install_phase(Phase.PLAYBOOK, context)
    assert installed == [("twice", Phase.PLAYBOOK, context)]  # not "helped": no helper


def test_each_acceleration_is_probed_where_it_is_installed() -> None:
    sides = {a.name: a.side for a in ACCELERATIONS}
    assert sides.pop("compiled-module-sources") == "modules"
    assert sides.pop("preloaded-module-utils") == "modules"
    assert sides.pop("modules-in-one-process") == "modules"
    assert sides.pop("kubeconfig-libyaml") == "modules"
    assert set(sides.values()) == {"runs"}
