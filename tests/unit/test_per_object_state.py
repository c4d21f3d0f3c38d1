"""Whatever the operator keeps per object goes when the object goes: a
thousand objects reconciled, retried, requeued, then deleted, leave nothing
behind in the queue, the controller, the reconciler, the metrics or the
dependent-watch registry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.controller.controller import Controller
from ansible_operator.controller.queue import Backoff
from ansible_operator.controller.reconcile import ObjectKey, Outcome
from ansible_operator.kube.cache import InformerCache
from ansible_operator.kube.types import GVK, Owner, Resource
from ansible_operator.manager.dependents import DependentWatches
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.watches import Watch
from ansible_operator.proxy.writes import Write
from ansible_operator.reconciler.annotations import RECONCILE_PERIOD
from ansible_operator.reconciler.ansible_reconciler import AnsibleReconciler, Shared
from ansible_operator.runner.fake import FakeRunner
from ansible_operator.settings import Settings
from ansible_operator.testing.admission import admission_without_ansible
from ansible_operator.testing.fake_api import FakeApi

# On the event loop's fake clock (looptime): sleeps, delays and timeouts take no real time.
pytestmark = pytest.mark.looptime

ADMISSION = admission_without_ansible()

OBJECTS = 1000
WIDGETS = Resource("example.com", "v1", "Widget", "widgets", True)
CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps", True)
KEYS = [ObjectKey(f"ns-{n % 50}", f"w{n}") for n in range(OBJECTS)]


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition` (on a busy machine: as long as 30s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30.0
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class Objects:
    """A reconciler over a set of live objects: the first reconcile of some
    fails (a retry with backoff), the others requeue after an hour; a
    deleted object's reconcile finds it gone."""

    def __init__(self) -> None:
        self.alive = set(KEYS)
        self.failing_once = set(KEYS[::3])
        self.succeeded: set[ObjectKey] = set()
        self.found_gone: set[ObjectKey] = set()

    async def reconcile(self, key: ObjectKey) -> Outcome:
        if key not in self.alive:
            self.found_gone.add(key)
            return Outcome()
        if key in self.failing_once:
            self.failing_once.discard(key)
            return Outcome(retry=True)
        self.succeeded.add(key)
        return Outcome(requeue_after=3600)


async def test_queue_and_controller_hold_nothing_for_deleted_objects() -> None:
    objects = Objects()
    controller = Controller(
        "example.com/v1/Widget", "Widget", objects, workers=4, metrics=Metrics()
    )
    controller.queue.backoff = Backoff(base=0.01)
    controller.start()
    for key in KEYS:
        controller.enqueue(key)
    await until(lambda: objects.succeeded == set(KEYS), "every object reconciled")
    for key in KEYS:
        controller.enqueue(key)  # changes: each replaces its pending hourly requeue
    await until(lambda: len(controller.queue) == 0, "the changes reconciled")

    for key in KEYS:  # deleted: the informer's DELETED event enqueues each key
        objects.alive.discard(key)
        controller.enqueue(key)
    await until(lambda: objects.found_gone == set(KEYS), "every deletion seen")
    await until(lambda: controller.queue.processing == 0, "the workers idle")

    queue = controller.queue
    assert (len(queue._by_priority), len(queue._by_age)) == (0, 0)
    assert (len(queue._queued), len(queue._processing)) == (0, 0)
    assert (len(queue._dirty), len(queue._waiting_due), len(queue._waiting)) == (0, 0, 0)
    assert queue.backoff._failures == {}
    assert controller._stops == {} and controller._annotated == {}
    await controller.stop(grace=1)


def widget(key: ObjectKey) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": key.name,
            "namespace": key.namespace,
            "uid": f"uid-{key.name}",
            "generation": 1,
            "creationTimestamp": "2024-05-01T10:00:00Z",
            # Half of them get an annotation warning the reconciler remembers.
            "annotations": {RECONCILE_PERIOD: "0.5"} if int(key.name[1:]) % 2 else {},
        },
        "spec": {"size": 1},
    }


class StoreReader:
    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.api.held(WIDGETS, name, namespace)


async def reconciled_widgets() -> tuple[FakeApi, Metrics, AnsibleReconciler]:
    """Every widget of KEYS reconciled once by a reconciler with a fake runner."""
    api = FakeApi()
    for key in KEYS:
        api.put(WIDGETS, widget(key))
    metrics = Metrics()
    shared = Shared(
        api=api,
        settings=Settings(),
        metrics=metrics,
        runner=FakeRunner(),
        admission=ADMISSION,
    )
    watch = Watch(
        gvk=GVK("example.com", "v1", "Widget"), role=Path("roles/w"), playbook=None, vars={}
    )
    reconciler = AnsibleReconciler(watch, WIDGETS, StoreReader(api), shared)
    for key in KEYS:
        await reconciler.reconcile(key)
    return api, metrics, reconciler


async def test_reconciler_and_metrics_forget_deleted_objects() -> None:
    api, metrics, reconciler = await reconciled_widgets()
    assert len(reconciler._warned) == OBJECTS // 2  # only objects with warnings hold one
    assert metrics.exposition().decode().count("resource_created_at_seconds{") == OBJECTS

    for key in KEYS:
        del api.objects[(WIDGETS.plural, key.namespace, key.name)]
        await reconciler.reconcile(key)

    assert reconciler._warned == {}
    assert "resource_created_at_seconds{" not in metrics.exposition().decode()


async def test_dependent_registry_forgets_the_writes_of_created_objects() -> None:
    api = FakeApi()
    cache = InformerCache(api, [])
    dependents = DependentWatches(cache)
    owner_watch = Watch(
        gvk=GVK("example.com", "v1", "Widget"), role=Path("roles/w"), playbook=None, vars={}
    )
    dependents.add_owner(owner_watch, lambda key: None, namespaced=True)
    created = []
    for number, key in enumerate(KEYS):
        owner = Owner("example.com", "v1", "Widget", key.namespace, key.name, f"uid-{key.name}")
        write = Write(CONFIGMAPS, owner, key.namespace, None)  # a create, to the collection
        dependents.record(write)
        obj = {
            "metadata": {
                "name": f"{key.name}-config",
                "namespace": key.namespace,
                "resourceVersion": str(10 + number),
            }
        }
        write.succeeded(obj)
        created.append(obj)
    await asyncio.sleep(0)  # the registry hears of the answers on the loop's next turn
    await cache.wait_synced()
    assert len(dependents._own_writes) == OBJECTS

    for obj in created:  # their ADDED events: nothing re-runs, nothing is kept
        api.send(CONFIGMAPS, "ADDED", obj)
    await until(lambda: len(cache.informer(CONFIGMAPS)) == OBJECTS, "the ADDED events")
    assert dependents._own_writes == {}
    assert dependents._in_flight == {}
    await cache.stop()


async def test_reconciler_and_metrics_forget_a_namespace_that_left_the_scope() -> None:
    _api, metrics, reconciler = await reconciled_widgets()

    reconciler.forget_namespace("ns-7")  # relabelled out: nobody deleted its objects

    left = [key for key in KEYS if key.namespace == "ns-7"]
    assert not any(key.namespace == "ns-7" for key in reconciler._warned)
    exposition = metrics.exposition().decode()
    assert 'namespace="ns-7"' not in exposition
    assert exposition.count("resource_created_at_seconds{") == OBJECTS - len(left)
