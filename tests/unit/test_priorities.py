"""Where an event or an outcome puts an object in its controller's queue, and
the manager's listener that tells the controller (controller/priorities.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.controller.controller import Controller
from ansible_operator.controller.priorities import Source, event_source, priority
from ansible_operator.controller.reconcile import ObjectKey, Outcome
from ansible_operator.kube.types import GVK
from ansible_operator.manager.manager import _primary_listener
from ansible_operator.observability.metrics import Metrics
from ansible_operator.project.watches import Watch
from ansible_operator.reconciler.annotations import PRIORITY

pytestmark = pytest.mark.looptime


@pytest.mark.parametrize(
    ("event", "listed", "source"),
    [
        ("ADDED", True, Source.LIST),  # the state a list found: not a change
        ("ADDED", False, Source.CHANGE),  # created now
        ("MODIFIED", False, Source.CHANGE),
        ("MODIFIED", True, Source.CHANGE),  # a relist found it changed: someone did
        ("DELETED", True, Source.CHANGE),  # ... or gone
        ("DELETED", False, Source.CHANGE),
    ],
)
def test_only_what_a_list_announced_waits_behind_the_changes(
    event: str, listed: bool, source: Source
) -> None:
    assert event_source(event, listed) is source


def test_a_priority_is_the_sources_level_plus_the_watchs_plus_the_annotations() -> None:
    assert [priority(source) for source in Source] == [0, -50, -50, -100, -100]
    assert priority(Source.LIST, watch=10, annotated=100) == 10
    assert priority(Source.CHANGE, watch=-5, annotated=-100) == -105


class Nothing:
    async def reconcile(self, key: ObjectKey) -> Outcome:
        return Outcome()


def widget(name: str, version: int, priority: str | None = None) -> dict[str, Any]:
    annotations = {} if priority is None else {PRIORITY: priority}
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "resourceVersion": str(version),
            "generation": version,
            "annotations": annotations,
        },
        "spec": {"v": version},
    }


async def test_the_listener_queues_listed_objects_low_and_changes_high() -> None:
    watch = Watch(gvk=GVK("example.com", "v1", "Widget"), role=None, playbook=None, vars={})
    controller = Controller("g/v/Widget", "Widget", Nothing(), workers=1, metrics=Metrics())
    hear = _primary_listener(controller, watch)
    hear("ADDED", None, widget("listed", 1), True)
    hear("ADDED", None, widget("vip", 1, priority="100"), True)
    hear("ADDED", None, widget("bad", 1, priority="soon"), True)
    hear("ADDED", None, widget("created", 1), False)
    hear("MODIFIED", widget("listed", 1), widget("listed", 2), False)
    handed = [await controller.queue.take() for _ in range(4)]
    assert [(h.item.name, h.source, h.priority) for h in handed] == [
        ("vip", "list", 0),  # its annotation ranks its list with changes (first come first)
        ("created", "change", 0),
        ("listed", "change", 0),  # raised by the edit
        ("bad", "list", -100),  # a bad annotation counts as none here: its reconcile says why
    ]
    assert controller._annotated == {ObjectKey("team", "vip"): 100}
    hear("DELETED", widget("vip", 1, priority="100"), widget("vip", 1, priority="100"), False)
    assert controller._annotated == {}  # nothing kept of a deleted object
