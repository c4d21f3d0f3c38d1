"""ansible-core 2.19's numbers and booleans where a core kind wants strings,
sent as the strings 2.18 rendered (runner/string_fields.py), and said per task
(events.py): operators written for 2.18 keep working while their authors migrate."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ansible_operator.runner.events import RunSummary
from ansible_operator.runner.string_fields import Coerced, Coercions, coerce_string_fields


def test_numbers_and_booleans_in_string_only_fields_become_218s_strings() -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "web",
            "namespace": "team",
            "labels": {"count": 3, "tier": "web"},
            "annotations": {"enabled": True, "ratio": 1.5},
        },
        "data": {"replicas": 3, "name": "web"},
    }
    coerced, changed = coerce_string_fields(config_map, "", "ConfigMap")

    assert coerced["metadata"]["labels"] == {"count": "3", "tier": "web"}
    assert coerced["metadata"]["annotations"] == {"enabled": "True", "ratio": "1.5"}
    assert coerced["data"] == {"replicas": "3", "name": "web"}
    assert [(c.field, c.value, c.type) for c in changed] == [
        ("metadata.labels.count", "3", "number"),
        ("metadata.annotations.enabled", "true", "boolean"),
        ("metadata.annotations.ratio", "1.5", "number"),
        ("data.replicas", "3", "number"),
    ]
    assert changed[0].describe() == (
        "ConfigMap team/web metadata.labels.count was the number 3, which the API server "
        'refuses there; ansible-operator sent "3" as ansible-core 2.18 did'
    )


def test_a_pod_templates_labels_and_selector_too_but_never_other_fields() -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"generation": 2}},
            "template": {
                "metadata": {"labels": {"generation": 2}},
                "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]},
            },
        },
        "data": {"n": 1},  # not a ConfigMap: left alone (the API server says what it thinks)
    }
    coerced, changed = coerce_string_fields(deployment, "apps", "Deployment")

    assert coerced["spec"]["replicas"] == 3
    assert coerced["spec"]["selector"]["matchLabels"] == {"generation": "2"}
    assert coerced["spec"]["template"]["metadata"]["labels"] == {"generation": "2"}
    assert coerced["spec"]["template"]["spec"] == deployment["spec"]["template"]["spec"]
    assert coerced["data"] == {"n": 1}
    assert len(changed) == 2


scalars = st.one_of(
    st.text(max_size=5), st.integers(), st.booleans(), st.floats(allow_nan=False), st.none()
)
string_maps = st.dictionaries(st.text(min_size=1, max_size=5), scalars, max_size=4)


@given(labels=string_maps, data=string_maps, string_data=string_maps)
def test_after_coercion_no_number_or_boolean_is_left_in_a_string_only_field(
    labels: dict[str, Any], data: dict[str, Any], string_data: dict[str, Any]
) -> None:
    secret = {
        "kind": "Secret",
        "metadata": {"name": "s", "labels": labels},
        "data": data,
        "stringData": string_data,
    }
    coerced, changed = coerce_string_fields(secret, "", "Secret")

    for values in (coerced["metadata"]["labels"], coerced["data"], coerced["stringData"]):
        assert not any(isinstance(v, bool | int | float) for v in values.values())
    kept = [
        (where, key, value)
        for where, values in (("labels", labels), ("data", data), ("stringData", string_data))
        for key, value in values.items()
        if not isinstance(value, bool | int | float)
    ]
    for where, key, value in kept:  # strings and nulls as the role wrote them
        holder = coerced["metadata"]["labels"] if where == "labels" else coerced[where]
        assert holder[key] == value
    assert len(changed) == sum(
        isinstance(v, bool | int | float)
        for values in (labels, data, string_data)
        for v in values.values()
    )


def test_the_run_says_which_task_each_coercion_came_from() -> None:
    coercions = Coercions()
    coercions.add(Coerced("ConfigMap", "team", "web", "data.replicas", "3", "number"), at=100.5)
    summary = RunSummary()
    summary.fold.coercions = coercions
    for task, start, end in (("Before", 99.0, 100.0), ("Write the ConfigMap", 100.1, 101.0)):
        summary.add(
            {
                "event": "runner_on_ok",
                "event_data": {
                    "task": task,
                    "task_path": "/nowhere/roles/web/tasks/main.yml:7",
                    "start": _iso(start),
                    "end": _iso(end),
                },
            }
        )
    assert summary.coerced == (
        'task "Write the ConfigMap" (/nowhere/roles/web/tasks/main.yml:7): ConfigMap team/web '
        "data.replicas was the number 3, which the API server refuses there; ansible-operator "
        'sent "3" as ansible-core 2.18 did; ansible-core 2.19+ keeps a template\'s type: add '
        "`| string` to it (`ansible-operator check` names each such template)",
    )


def _iso(seconds: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat()
