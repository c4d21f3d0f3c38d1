"""A run's configuration is one pure function of the plan, the settings and
what the launcher offers (runner/configuration.py): each decision shown here
on data, without a process, a directory or a cluster."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ansible_operator.kube.types import Owner
from ansible_operator.runner import priority
from ansible_operator.runner.access import RunAccess
from ansible_operator.runner.ansible_paths import SearchPaths
from ansible_operator.runner.configuration import (
    REFERENCE,
    EventAddress,
    RunConfiguration,
    RunMode,
    RunPlace,
    Surroundings,
    configure,
    run_ansible_environment,
)
from ansible_operator.runner.event_plugin import SOCKET_ENV, TOKEN_ENV
from ansible_operator.runner.plan import RunPlan
from ansible_operator.runner.warm.launcher import WARM
from ansible_operator.settings import AnsibleSettings, RunSettings, Settings

OWNER = Owner(group="", version="v1", kind="ConfigMap", namespace="ns", name="cm", uid="u")
ROOT = Path("/runs")
SHIM = Path("/scratch/warm-runner/python")
HERE = Surroundings(
    environ={"HOME": "/home/op", "PATH": "/usr/bin"},
    cwd=Path("/project"),
    search=SearchPaths(roles=("/etc/ansible/roles",), collections=("/usr/share/collections",)),
    python="/venv/bin/python",
)
KUBECONFIG = {"users": [{"name": "run", "user": {"token": "t0ken"}}]}


def plan(**changes: object) -> RunPlan:
    fields: dict[str, object] = {
        "ident": "7-abcdef12",
        "owner": OWNER,
        "described": "kind=ConfigMap namespace=ns name=cm",
        "subject": Path("core", "v1", "ConfigMap", "ns", "cm"),
        "role": Path("/project/roles/cm"),
        "playbook": None,
        "extravars": {"size": 3},
        "verbosity": 2,
        "timeout": 60.0,
        "keep_artifacts": 5,
        "skip_facts": True,
        "label": "core/v1/ConfigMap",
    }
    fields.update(changes)
    return RunPlan(**fields)  # type: ignore[arg-type]


def configured(
    the_plan: RunPlan | None = None,
    settings: Settings | None = None,
    mode: RunMode = REFERENCE,
    surroundings: Surroundings = HERE,
) -> RunConfiguration:
    return configure(
        the_plan or plan(),
        settings or Settings(),
        mode=mode,
        access=RunAccess(kubeconfig=KUBECONFIG, env={"FROM_GRANT": "1"}),
        events=EventAddress(Path("/scratch/events.sock"), "event-token"),
        place=RunPlace(ROOT, "0f" * 16),
        surroundings=surroundings,
    )


def test_the_same_inputs_give_the_same_configuration() -> None:
    assert configured() == configured()


def test_a_run_directory_is_its_subjects_artifacts_and_a_private_directory_of_its_name() -> None:
    run_dir = configured().spec.run_dir
    assert run_dir.artifacts == ROOT / "core/v1/ConfigMap/ns/cm/artifacts"
    assert run_dir.path == ROOT / ".private" / ("0f" * 16)


def test_the_run_finds_its_way_back_and_its_priority_in_its_environment() -> None:
    env = configured(plan(nice=priority.ADMISSION)).spec.env
    assert env[SOCKET_ENV] == "/scratch/events.sock"
    assert env[TOKEN_ENV] == "event-token"
    assert env[priority.NICE_ENV] == str(priority.ADMISSION)
    assert configured().spec.env[priority.NICE_ENV] == str(priority.RECONCILE)


def test_the_inputs_are_the_plans_and_the_grants() -> None:
    cluster = plan().cluster_vars
    inputs = configured(
        settings=Settings(ansible=AnsibleSettings(inventory=Path("/project/inventory")))
    ).inputs
    assert inputs.extravars == {"size": 3}
    assert inputs.cluster_vars is None and cluster is None
    assert inputs.kubeconfig == KUBECONFIG
    assert inputs.envvars == {"FROM_GRANT": "1"}
    assert inputs.inventory == Path("/project/inventory")


def test_a_reference_run_names_no_interpreter_and_pipes_no_module() -> None:
    config = configured()
    assert config.inputs.interpreter is None
    assert "ANSIBLE_PIPELINING" not in config.spec.env


def test_a_warm_run_names_the_shim_and_pipes_its_modules() -> None:
    config = configured(mode=RunMode("warm", interpreter=SHIM, pipelining=True))
    assert config.inputs.interpreter == SHIM
    assert config.spec.env["ANSIBLE_PIPELINING"] == "True"
    # The operator's own choice of pipelining stands.
    mine = Surroundings({**HERE.environ, "ANSIBLE_PIPELINING": "False"}, HERE.cwd, HERE.search)
    assert "ANSIBLE_PIPELINING" not in configured(mode=WARM, surroundings=mine).spec.env


def test_ansible_runner_rotates_only_what_no_other_run_of_the_subject_still_writes() -> None:
    assert configured(plan(keep_artifacts=5)).spec.keep_artifacts == 5
    assert "--rotate-artifacts" in configured(plan(keep_artifacts=5)).spec.command()
    # Runs of the subject may overlap (admission), or none is kept: the host rotates.
    assert configured(plan(keep_artifacts=5, shares_subject=True)).spec.keep_artifacts == 0
    assert configured(plan(keep_artifacts=0)).spec.keep_artifacts == 0


def test_the_command_is_our_pythons_ansible_runner_for_the_plans_role() -> None:
    spec = configured(plan(verbosity=3, timeout=None)).spec
    assert spec.command()[:4] == ["/venv/bin/python", "-m", "ansible_runner", "run"]
    command = " ".join(spec.command())
    assert "--role cm --roles-path /project/roles --hosts localhost --role-skip-facts" in command
    assert spec.command()[-1] == "-vvv"
    assert spec.timeout is None
    assert spec.memory_limit == Settings().runs.run_memory_limit
    limited = Settings(runs=RunSettings(run_memory_limit=256 << 20))
    assert configured(settings=limited).spec.memory_limit == 256 << 20


paths = st.lists(
    st.text(st.characters(codec="ascii", exclude_characters=os.pathsep + "\0"), min_size=1),
    max_size=3,
).map(lambda parts: os.pathsep.join(parts) or None)


@given(roles=paths, collections=paths, callbacks=paths, pipelining=st.sampled_from([None, "0"]))
def test_a_warm_run_differs_from_its_warm_runner_in_no_ansible_setting(
    roles: str | None, collections: str | None, callbacks: str | None, pipelining: str | None
) -> None:
    # What the warm runner imports Ansible with is what a run in warm mode gets:
    # a run that differed in a setting read at import would start a fresh
    # ansible-playbook (run_server.py), and lose the warm runner.
    environ = dict(HERE.environ)
    if callbacks is not None:
        environ["ANSIBLE_CALLBACK_PLUGINS"] = callbacks
    if pipelining is not None:
        environ["ANSIBLE_PIPELINING"] = pipelining
    here = Surroundings(environ, HERE.cwd, HERE.search, HERE.python)
    settings = Settings(ansible=AnsibleSettings(roles_path=roles, collections_path=collections))
    warm_runner = run_ansible_environment(settings, WARM, here)
    mode = RunMode("warm", interpreter=SHIM, pipelining=WARM.pipelining)
    run = configured(settings=settings, mode=mode, surroundings=here).spec.env
    ansible = {k: v for k, v in run.items() if k.startswith("ANSIBLE_") and "_OPERATOR_" not in k}
    assert ansible == warm_runner
