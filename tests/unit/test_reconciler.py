"""One object's reconcile, as the user sees it in the object's status, its
finalizers, its Events and when it is reconciled again; Ansible is the fake
runner (runner/fake.py) and the API an in-memory store."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.controller.reconcile import ObjectKey, Outcome
from ansible_operator.kube.types import GVK, Resource
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.watches import Finalizer, Watch
from ansible_operator.reconciler.ansible_reconciler import AnsibleReconciler, Shared
from ansible_operator.runner import fake
from ansible_operator.runner.fake import FakeRunner
from ansible_operator.settings import AnsibleSettings, RunSettings, Settings
from ansible_operator.testing.admission import admission_without_ansible
from ansible_operator.testing.fake_api import FakeApi

ADMISSION = admission_without_ansible()

MEMCACHED = Resource(
    "cache.example.com",
    "v1alpha1",
    "Memcached",
    "memcacheds",
    True,
    subresources=frozenset({"status"}),
)
FINALIZER = "cache.example.com/finalizer"
KEY = ObjectKey("team", "mc")


class StoreReader:
    """The informer's cache: what the store holds."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.api.objects.get((MEMCACHED.plural, namespace, name))
        return copy.deepcopy(found) if found is not None else None


def memcached(**annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {
            "name": KEY.name,
            "namespace": KEY.namespace,
            "uid": "1234",
            "generation": 3,
            "annotations": annotations,
        },
        "spec": {"size": 2},
    }


def make_watch(**settings: Any) -> Watch:
    return Watch(
        gvk=GVK("cache.example.com", "v1alpha1", "Memcached"),
        role=Path("roles/memcached"),
        playbook=None,
        vars={},
        **settings,
    )


class Setup:
    def __init__(
        self, runner: FakeRunner, watch: Watch, obj: dict[str, Any], *, check_mode: bool = False
    ) -> None:
        self.api = FakeApi()
        self.api.put(MEMCACHED, obj)
        self.runner = runner
        self.settings = Settings(
            ansible=AnsibleSettings(check_mode=check_mode),
            runs=RunSettings(reconcile_period=36000.0),
        )
        shared = Shared(
            api=self.api,
            settings=self.settings,
            metrics=Metrics(),
            runner=runner,
            admission=ADMISSION,
        )
        self.reconciler = AnsibleReconciler(watch, MEMCACHED, StoreReader(self.api), shared)

    async def reconcile(self) -> Outcome:
        return await self.reconciler.reconcile(KEY)

    def stored(self) -> dict[str, Any] | None:
        return self.api.objects.get((MEMCACHED.plural, KEY.namespace, KEY.name))

    def conditions(self) -> dict[str, dict[str, Any]]:
        stored = self.stored()
        assert stored is not None
        return {c["type"]: c for c in stored["status"]["conditions"]}


def condition_states(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def kstatus_conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in status["conditions"] if c["type"] in ("Ready", "Reconciling", "Stalled")]


async def test_a_successful_run_goes_running_then_successful_with_its_results() -> None:
    setup = Setup(FakeRunner(fake.succeeded(ok=4, changed=1)), make_watch(), memcached())

    outcome = await setup.reconcile()

    first, last = setup.api.statuses[0], setup.api.statuses[-1]
    # A new generation: Reconciling, not Ready yet (kstatus: InProgress).
    assert condition_states(first) == {"Running": "True", "Ready": "False", "Reconciling": "True"}
    assert "observedGeneration" not in first  # the outcome is not known yet
    assert condition_states(last) == {
        "Running": "False",
        "Successful": "True",
        "Failure": "False",
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
    }
    assert last["observedGeneration"] == 3
    assert {c["observedGeneration"] for c in kstatus_conditions(last)} == {3}
    result = setup.conditions()["Successful"]["ansibleResult"]
    assert (result["ok"], result["changed"], result["failures"]) == (4, 1, 0)
    assert outcome == Outcome(requeue_after=36000.0, periodic=True)
    assert len(setup.runner.seen) == 1
    assert setup.runner.seen[0].plan.role == Path("roles/memcached")
    # The outcome carries the run it made, named as the reconciler named it.
    assert outcome.run is not None and outcome.run.succeeded
    assert outcome.run.ident == setup.runner.seen[0].plan.ident


async def test_a_failed_run_sets_failure_with_the_task_message_and_backs_off() -> None:
    runner = FakeRunner(fake.failed("install", "package memcached not found"))
    setup = Setup(runner, make_watch(), memcached())

    outcome = await setup.reconcile()

    failure = setup.conditions()["Failure"]
    assert failure["status"] == "True"
    assert failure["reason"] == "Failed"
    assert failure["message"] == "package memcached not found"
    assert failure["ansibleResult"]["failures"] == 1
    assert setup.stored()["status"]["observedGeneration"] == 3  # type: ignore[index]
    assert [(e["reason"], e["type"]) for e in setup.api.events] == [("Failed", "Warning")]
    assert outcome.retry and outcome.requeue_after is None


async def test_a_run_that_reports_no_stats_is_a_failure_with_its_reason() -> None:
    runner = FakeRunner(fake.without_stats("ansible-runner: no such role memcached"))
    setup = Setup(runner, make_watch(), memcached())

    outcome = await setup.reconcile()

    failure = setup.conditions()["Failure"]
    assert failure["status"] == "True"
    assert "no such role memcached" in failure["message"]
    assert "ansibleResult" not in failure
    assert setup.conditions()["Successful"]["status"] != "True"
    assert outcome.retry


async def test_a_later_success_says_so_in_an_event() -> None:
    runner = FakeRunner(fake.failed("install", "boom"), fake.succeeded())
    setup = Setup(runner, make_watch(), memcached())
    await setup.reconcile()
    await setup.reconcile()
    assert [e["reason"] for e in setup.api.events] == ["Failed", "ReconcileSucceeded"]
    assert setup.conditions()["Failure"]["status"] == "False"


@pytest.mark.parametrize(
    ("run", "watch_period", "annotation", "expected"),
    [
        (fake.succeeded(fake.requeue_after("30s")), 600.0, "2m", Outcome(requeue_after=30.0)),
        (fake.succeeded(), 600.0, "2m", Outcome(requeue_after=120.0, periodic=True)),
        (fake.succeeded(), 600.0, None, Outcome(requeue_after=600.0, periodic=True)),
        (fake.succeeded(), None, None, Outcome(requeue_after=36000.0, periodic=True)),
        (fake.failed("t", "boom", fake.requeue_after("45s")), 600.0, None, Outcome(45.0)),
        (fake.failed("t", "boom"), 600.0, "2m", Outcome(retry=True)),
    ],
    ids=[
        "requeue_after wins",
        "annotation period",
        "watch period",
        "operator period",
        "failure with requeue_after",
        "failure backs off",
    ],
)
async def test_when_the_object_is_reconciled_again(
    run: fake.FakeRun,
    watch_period: float | None,
    annotation: str | None,
    expected: Outcome,
) -> None:
    annotations = {"ansible.sdk.operatorframework.io/reconcile-period": annotation}
    obj = memcached(**{k: v for k, v in annotations.items() if v is not None})
    setup = Setup(FakeRunner(run), make_watch(reconcile_period=watch_period), obj)
    assert await setup.reconcile() == expected


async def test_the_finalizer_is_added_before_a_run_and_removed_after_a_finalizer_run() -> None:
    watch = make_watch(finalizer=Finalizer(FINALIZER, vars={"state": "absent"}))
    runner = FakeRunner(fake.succeeded(), fake.succeeded())
    setup = Setup(runner, watch, memcached())

    await setup.reconcile()
    stored = setup.stored()
    assert stored is not None and stored["metadata"]["finalizers"] == [FINALIZER]
    assert runner.seen[0].obj["metadata"]["finalizers"] == [FINALIZER]  # added before the run

    stored["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # kubectl delete
    await setup.reconcile()

    assert "state" not in runner.seen[0].plan.extravars
    assert runner.seen[1].plan.extravars["state"] == "absent"  # the finalizer's run
    assert setup.stored() is None  # finalizer gone: the object with it


async def test_a_failed_finalizer_run_keeps_the_finalizer() -> None:
    watch = make_watch(finalizer=Finalizer(FINALIZER))
    setup = Setup(FakeRunner(fake.failed("cleanup", "backup unreachable")), watch, memcached())
    obj = setup.stored()
    assert obj is not None
    obj["metadata"]["finalizers"] = [FINALIZER]
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    outcome = await setup.reconcile()

    assert setup.stored()["metadata"]["finalizers"] == [FINALIZER]  # type: ignore[index]
    assert setup.conditions()["Failure"]["message"] == "backup unreachable"
    assert outcome.retry


async def test_a_deleted_object_without_our_finalizer_is_not_run() -> None:
    setup = Setup(FakeRunner(), make_watch(finalizer=Finalizer(FINALIZER)), memcached())
    setup.stored()["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # type: ignore[index]
    assert await setup.reconcile() == Outcome()
    assert setup.runner.seen == []


async def test_the_objects_own_settings_reach_the_runner() -> None:
    obj = memcached(
        **{
            "ansible.sdk.operatorframework.io/verbosity": "4",
            "ansible.sdk.operatorframework.io/max-runner-artifacts": "3",
        }
    )
    setup = Setup(FakeRunner(), make_watch(), obj)
    await setup.reconcile()
    plan = setup.runner.seen[0].plan
    assert (plan.verbosity, plan.keep_artifacts) == (4, 3)
    assert plan.owner.kind == "Memcached"


async def test_check_mode_runs_but_writes_nothing() -> None:
    setup = Setup(
        FakeRunner(fake.failed("t", "would fail")), make_watch(), memcached(), check_mode=True
    )
    await setup.reconcile()
    assert len(setup.runner.seen) == 1
    assert setup.api.statuses == [] and setup.api.events == []


async def test_a_periodic_run_of_a_ready_object_leaves_it_ready() -> None:
    """GitOps tools read kstatus: an object must not go InProgress every period."""
    setup = Setup(FakeRunner(fake.succeeded(), fake.succeeded()), make_watch(), memcached())
    await setup.reconcile()
    written = len(setup.api.statuses)

    await setup.reconcile()  # the same generation again

    during = setup.api.statuses[written]
    assert condition_states(during)["Running"] == "True"
    assert condition_states(during)["Ready"] == "True"
    assert condition_states(during)["Reconciling"] == "False"


async def test_a_failure_that_retries_is_reconciling_and_refused_data_is_stalled() -> None:
    retried = Setup(FakeRunner(fake.failed("install", "not yet")), make_watch(), memcached())
    await retried.reconcile()
    states = condition_states(retried.stored()["status"])  # type: ignore[index]
    assert (states["Ready"], states["Reconciling"], states["Stalled"]) == ("False", "True", "False")

    obj = memcached()
    obj["spec"]["ansibleBecomeExe"] = "id"
    refused = Setup(FakeRunner(), make_watch(), obj)
    await refused.reconcile()
    status = refused.stored()["status"]  # type: ignore[index]
    states = condition_states(status)
    assert (states["Ready"], states["Reconciling"], states["Stalled"]) == ("False", "False", "True")
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "RefusedData" and "ansibleBecomeExe" in stalled["message"]
    assert status["observedGeneration"] == stalled["observedGeneration"] == 3


class SummaryRole(FakeRunner):
    """A role that sets its own summary `Ready` as k8s_status does: the object's
    conditions merged by type and the whole list written, the operator's included."""

    def __init__(self, setup_api: FakeApi, ready: str) -> None:
        super().__init__()
        self.api, self.ready = setup_api, ready

    async def run(self, plan: Any) -> Any:
        result = await super().run(plan)
        stored = self.api.objects[(MEMCACHED.plural, KEY.namespace, KEY.name)]
        listed = [c for c in stored["status"]["conditions"] if c["type"] != "Ready"]
        own = {"type": "Ready", "status": self.ready, "reason": "Summary", "message": "mine"}
        stored["status"]["conditions"] = [*listed, own]
        written = {c["type"]: c for c in stored["status"]["conditions"]}
        return dataclasses.replace(result, owner_conditions=written)


@pytest.mark.parametrize("ready", ["True", "False"])
async def test_a_role_that_sets_its_own_ready_keeps_it(ready: str) -> None:
    """The samples' summary conditions (cluster-api's SetSummary) are the role's."""
    setup = Setup(FakeRunner(), make_watch(), memcached())
    setup.runner = setup.reconciler.shared.runner = SummaryRole(setup.api, ready)

    await setup.reconcile()
    assert setup.conditions()["Ready"] | {"status": ready} == setup.conditions()["Ready"]
    assert (setup.conditions()["Ready"]["reason"], setup.conditions()["Successful"]["status"]) == (
        "Summary",
        "True",
    )
    # A new generation: the operator no longer writes Ready, not even at the run's start.
    setup.stored()["metadata"]["generation"] = 4  # type: ignore[index]
    written = len(setup.api.statuses)
    await setup.reconcile()
    assert all(
        c["reason"] == "Summary"
        for status in setup.api.statuses[written:]
        for c in status["conditions"]
        if c["type"] == "Ready"
    )
    assert setup.conditions()["Reconciling"]["status"] == "False"


async def test_a_role_that_rewrites_the_operator_s_ready_unchanged_does_not_own_it() -> None:
    """k8s_status writes the whole list back: the operator's Ready, as it was, is not the role's."""

    class CopyingRole(FakeRunner):
        async def run(self, plan: Any) -> Any:
            result = await super().run(plan)
            stored = setup.api.objects[(MEMCACHED.plural, KEY.namespace, KEY.name)]
            written = {c["type"]: dict(c) for c in stored["status"]["conditions"]}
            return dataclasses.replace(result, owner_conditions=written)

    setup = Setup(CopyingRole(fake.succeeded(), fake.failed("x", "no")), make_watch(), memcached())
    await setup.reconcile()
    assert setup.conditions()["Ready"]["status"] == "True"
    await setup.reconcile()  # fails: the operator's Ready follows
    assert setup.conditions()["Ready"]["status"] == "False"
