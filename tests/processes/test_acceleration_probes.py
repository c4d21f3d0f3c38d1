"""Each acceleration's probe calls what its acceleration relies on and checks
the effect: it passes on the installed releases, and when that behaviour
changes (here a patch stands in for a release that changed it) it fails,
saying what changed, and leaves only its acceleration off.
Real ansible-runner, pexpect and ansible-core, in this process; no cluster."""

from __future__ import annotations

import io
import types
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_operator.runner.warm import acceleration
from ansible_operator.runner.warm.acceleration import Acceleration, Verdict
from ansible_operator.runner.warm.accelerations import (
    ACCELERATIONS,
    compiled_module_sources,
    event_files_whole,
    kubeconfig_libyaml,
    modules_in_one_process,
    playbook_in_fork,
    preloaded_module_utils,
    pty_close_without_delay,
    shared_payload_cache,
    task_inline,
)

# Probed through a warm module interpreter's shim (tests/processes/test_accelerations.py).
NEEDS_THE_WARM_RUNNER = {"warm-module-interpreter"}
RELEASE = tuple(int(part) for part in metadata.version("ansible-core").split(".")[:2])


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's verdicts, as in a warm process that probed only the test's."""
    monkeypatch.setattr(acceleration, "_verdicts", {})
    monkeypatch.setattr(acceleration, "_probed", {})
    monkeypatch.setattr(acceleration, "_pending", {})
    monkeypatch.setattr(task_inline, "_context_kind", None)
    yield


def verdict(record: Acceleration) -> Verdict:
    return acceleration.probe([record])[record.name]


@pytest.mark.parametrize(
    "record",
    [a for a in ACCELERATIONS if a.name not in NEEDS_THE_WARM_RUNNER],
    ids=lambda a: a.name,
)
def test_each_probe_passes_on_the_releases_it_was_made_for(record: Acceleration) -> None:
    found = verdict(record)
    assert found.on == (record.ansible_core_from <= RELEASE), found.why


def test_task_inline_enters_the_context_the_worker_enters() -> None:
    assert verdict(task_inline.ACCELERATION).on
    expected = "none" if RELEASE < (2, 19) else "task" if RELEASE < (2, 21) else "create"
    assert task_inline._context_kind == expected


def test_ansible_runner_starting_its_command_otherwise_turns_off_playbook_in_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ansible_runner.runner as runner_module
    import pexpect

    # A release that keeps its own pexpect.spawn: replacing the module's is not seen.
    monkeypatch.setattr(runner_module, "pexpect", types.SimpleNamespace(**vars(pexpect)))
    found = verdict(playbook_in_fork.ACCELERATION)
    assert not found.on
    assert "no longer starts its command through pexpect.spawn" in found.why


def test_event_files_written_otherwise_turn_off_event_files_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json
    from pathlib import Path

    import ansible_runner.runner as runner_module

    def writes_itself(self: Any, event: dict[str, Any]) -> None:
        path = Path(
            self.config.artifact_dir, "job_events", f"{event['counter']}-{event['uuid']}.json"
        )
        path.write_text(json.dumps(event))

    monkeypatch.setattr(runner_module.Runner, "event_callback", writes_itself)
    found = verdict(event_files_whole.ACCELERATION)
    assert not found.on
    assert "no longer writes an event's file with its json module's dump" in found.why


def test_a_terminal_closing_without_its_delay_turns_off_pty_close_without_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ptyprocess import PtyProcess

    stock = PtyProcess.close

    def close_at_once(self: Any, force: bool = True) -> None:
        self.delayafterclose = 0.0
        stock(self, force)

    monkeypatch.setattr(PtyProcess, "close", close_at_once)
    found = verdict(pty_close_without_delay.ACCELERATION)
    assert not found.on
    assert "no longer sleeps delayafterclose" in found.why


def test_zipimport_compiling_otherwise_turns_off_compiled_module_sources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import zipimport

    def compiled_itself(self: Any, fullname: str) -> types.CodeType:
        return compile(self.get_source(fullname), fullname, "exec")

    monkeypatch.setattr(zipimport.zipimporter, "get_code", compiled_itself)
    found = verdict(compiled_module_sources.ACCELERATION)
    assert not found.on
    assert "no longer runs the code _compile_source compiles" in found.why


def test_a_module_runner_that_imports_everything_again_turns_off_preloaded_module_utils(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runpy
    import sys

    stock = runpy.run_module

    def fresh_imports(
        mod_name: str, init_globals: Any = None, run_name: Any = None, alter_sys: bool = False
    ) -> Any:
        for name in [n for n in sys.modules if n.startswith("ansible_collections")]:
            del sys.modules[name]
        return stock(mod_name, init_globals, run_name, alter_sys)

    monkeypatch.setattr(runpy, "run_module", fresh_imports)
    found = verdict(preloaded_module_utils.ACCELERATION)
    assert not found.on
    assert "did not get the preloaded module" in found.why


def test_a_module_runner_called_otherwise_turns_off_preloaded_module_utils(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runpy

    def run_module(name: str, globals_: Any = None, run_name: Any = None) -> Any:
        raise AssertionError("not called by the probe")

    monkeypatch.setattr(runpy, "run_module", run_module)
    found = verdict(preloaded_module_utils.ACCELERATION)
    assert not found.on
    assert "runpy.run_module takes other arguments" in found.why


def test_payloads_cached_elsewhere_turn_off_shared_payload_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ansible.executor import module_common

    monkeypatch.setattr(module_common, "modify_module", lambda *_args, **_kwargs: (b"", "", None))
    found = verdict(shared_payload_cache.ACCELERATION)
    assert not found.on
    assert "no longer caches module payloads in ansiballz_cache" in found.why


def test_a_worker_keeping_its_hosts_variables_turns_off_task_inline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ansible.executor.process.worker import WorkerProcess

    stock = WorkerProcess._run

    def keeps_them(self: Any) -> None:
        kept = self._host.vars
        stock(self)
        self._host.vars = kept

    monkeypatch.setattr(WorkerProcess, "_run", keeps_them)
    found = verdict(task_inline.ACCELERATION)
    assert not found.on
    assert "no longer blanks its host's vars" in found.why
    assert task_inline._context_kind is None


def test_a_strategy_not_counting_its_pending_result_turns_off_task_inline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ansible.plugins.strategy import StrategyBase

    stock = StrategyBase._queue_task

    def uncounted(self: Any, *args: Any) -> None:
        stock(self, *args)
        self._pending_results -= 1

    monkeypatch.setattr(StrategyBase, "_queue_task", uncounted)
    found = verdict(task_inline.ACCELERATION)
    assert not found.on
    assert "no longer counts the pending result" in found.why


def test_ansible_keeping_warnings_elsewhere_turns_off_modules_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A release keeping a module's warnings where the process state put back
    between modules does not reach (here: another module's attribute)."""
    import threading

    from ansible.module_utils.common import warnings

    kept: list[str] = []
    monkeypatch.setattr(threading, "_ansible_warnings", kept, raising=False)
    monkeypatch.setattr(warnings, "warn", kept.append)
    monkeypatch.setattr(warnings, "get_warning_messages", lambda: tuple(kept))
    found = verdict(modules_in_one_process.ACCELERATION)
    assert not found.on
    assert "a second program found what the first left behind" in found.why


def test_atexit_without_its_private_runner_turns_off_modules_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import atexit

    monkeypatch.delattr(atexit, "_run_exitfuncs")
    found = verdict(modules_in_one_process.ACCELERATION)
    assert not found.on
    assert "atexit has no _run_exitfuncs" in found.why


def test_a_kube_config_module_with_another_yaml_turns_off_kubeconfig_libyaml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubernetes.config import kube_config

    monkeypatch.setattr(kube_config, "yaml", types.SimpleNamespace(**vars(yaml)))
    found = verdict(kubeconfig_libyaml.ACCELERATION)
    assert not found.on
    assert "kube_config.yaml is not PyYAML's module" in found.why


def test_a_kube_config_parsing_without_its_modules_safe_load_turns_off_kubeconfig_libyaml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubernetes.config import kube_config

    stock = kube_config.KubeConfigMerger.load_config

    def bound_at_import(self: Any, path: str) -> None:
        # A release that took safe_load from PyYAML when imported: the
        # module's `yaml`, replaced later, is not what parses.
        replaced = kube_config.yaml
        kube_config.yaml = yaml
        try:
            stock(self, path)
        finally:
            kube_config.yaml = replaced

    monkeypatch.setattr(kube_config.KubeConfigMerger, "load_config", bound_at_import)
    found = verdict(kubeconfig_libyaml.ACCELERATION)
    assert not found.on
    assert "no longer parses a kubeconfig file with its module's yaml.safe_load" in found.why


def test_pyyaml_without_libyaml_turns_off_kubeconfig_libyaml_and_its_installer_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubernetes.config import kube_config

    monkeypatch.delattr(yaml, "CSafeLoader")
    found = verdict(kubeconfig_libyaml.ACCELERATION)
    assert not found.on
    assert "PyYAML has no CSafeLoader" in found.why
    with pytest.raises(AttributeError):
        kubeconfig_libyaml.install(acceleration.Context())
    assert kube_config.yaml is yaml


def _libyaml_first() -> tuple[kubeconfig_libyaml.LibyamlFirst, list[bool]]:
    """As for the run's own kubeconfig: every stream is one libyaml may parse."""
    parsed: list[bool] = []
    replacement = kubeconfig_libyaml.LibyamlFirst(yaml, lambda: parsed.append(True), lambda _: True)
    return replacement, parsed


def _named_file(text: str) -> io.StringIO:
    file = io.StringIO(text)
    file.name = "/somewhere/kubeconfig"  # type: ignore[misc]
    return file


# What a kubeconfig holds: mappings of names to text, numbers, flags, lists
# and mappings again. NaN is left out: it equals nothing, not even itself.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.dates()
    | st.binary(max_size=32)
)
DOCUMENTS = st.recursive(
    st.dictionaries(st.text(), SCALARS, max_size=4),
    lambda inner: st.dictionaries(st.text(), inner | st.lists(inner | SCALARS, max_size=3)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    document=DOCUMENTS,
    flow=st.sampled_from([None, True, False]),
    sort_keys=st.booleans(),
    as_file=st.booleans(),
)
def test_libyaml_first_loads_what_the_pure_loader_loads(
    document: dict[str, Any], flow: bool | None, sort_keys: bool, as_file: bool
) -> None:
    text = yaml.safe_dump(document, default_flow_style=flow, sort_keys=sort_keys)
    replacement, parsed = _libyaml_first()
    loaded = replacement.safe_load(_named_file(text) if as_file else text)
    assert loaded == yaml.safe_load(text) == document
    assert parsed == [True]  # libyaml's parse, not the fallback's


@pytest.mark.parametrize("text", ["a:\t1\n", "|#\n", "{a?}\n", "! \n", "a: 1\n"])
def test_only_the_runs_own_kubeconfig_is_parsed_by_libyaml(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts libyaml reads otherwise than PyYAML (laxer, or another value) in
    a kubeconfig a role names itself: the stock loader's answer."""
    run_kubeconfig = tmp_path / "run-kubeconfig"
    monkeypatch.setenv(kubeconfig_libyaml.RUN_KUBECONFIG_ENV, str(run_kubeconfig))
    other = tmp_path / "roles-kubeconfig"
    other.write_text(text)
    parsed: list[bool] = []
    replacement = kubeconfig_libyaml.LibyamlFirst(
        yaml, lambda: parsed.append(True), kubeconfig_libyaml.the_runs_kubeconfig
    )

    def outcome(load: Any) -> tuple[str, Any]:
        try:
            with other.open() as stream:
                return "loaded", load(stream)
        except yaml.YAMLError as error:
            return type(error).__name__, str(error)

    assert outcome(replacement.safe_load) == outcome(yaml.safe_load)
    assert parsed == []
    run_kubeconfig.write_text("a: 1\n")
    with run_kubeconfig.open() as stream:
        assert replacement.safe_load(stream) == {"a": 1}
    assert parsed == [True]


@pytest.mark.parametrize(
    "text",
    [
        "|\n  \tindented by a tab\n",  # a block scalar PyYAML reads, libyaml refuses
        "greeting: \ud800\n",  # a lone surrogate: libyaml cannot even encode it
        "clusters: [unclosed\n",
        "users: 1\n- listed\n",
        "a: 1\n---\nb: 2\n",
        "? [a, b]\n: unhashable\n",
    ],
    ids=["pure-only", "surrogate", "unclosed", "mixed", "two-documents", "unhashable-key"],
)
@pytest.mark.parametrize("as_file", [False, True], ids=["text", "file"])
def test_what_libyaml_refuses_gets_the_pure_loaders_value_or_error(
    text: str, as_file: bool
) -> None:
    def outcome(load: Any) -> tuple[str, Any]:
        try:
            return "loaded", load(_named_file(text) if as_file else text)
        except yaml.YAMLError as error:
            return type(error).__name__, str(error)

    replacement, parsed = _libyaml_first()
    assert outcome(replacement.safe_load) == outcome(yaml.safe_load)
    assert parsed == []
