"""Field maps: moves, splits and defaults each way, and the round trips users rely on.

The properties run over generated objects: any object, converted to another version and
back, is the object it was (what the other version cannot hold travels in the annotation);
the sample HarborCluster's two versions, over objects valid under their real schemas.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ansible_operator.conversion import fidelity, paths
from ansible_operator.conversion.converter import ConversionFailed, Converter
from ansible_operator.conversion.field_map import (
    HUB,
    SPOKE,
    Default,
    FieldMap,
    Format,
    FormatError,
    Move,
    Split,
)
from ansible_operator.conversion.kinds import KindConversion, VersionConversion
from ansible_operator.conversion.schema import prune, version_schemas
from ansible_operator.project.watches import load_watches_file
from schema_objects import JSON, KEYS, METADATA, objects_of

ROOT = Path(__file__).resolve().parents[2]
P = paths.parse


def converter(field_map: FieldMap, schemas: dict[str, Any] | None = None) -> Converter:
    declared = KindConversion(
        "example.com",
        "Widget",
        "v2",
        (VersionConversion("v1", field_map, source="watches.yaml:3"),),
        source="watches.yaml:1",
    )
    return Converter(declared, schemas)


def widget(version: str, **body: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"example.com/{version}",
        "kind": "Widget",
        "metadata": {"name": "w", "uid": "u-1"},
        **body,
    }


# ----- formats -----------------------------------------------------------------------


def test_a_format_joins_its_parts_and_cuts_at_the_last_separator() -> None:
    image = Format.parse("{repository}:{tag}")
    assert image.join({"repository": "registry:5000/app", "tag": "1.2"}) == "registry:5000/app:1.2"
    assert image.split("registry:5000/app:1.2") == {"repository": "registry:5000/app", "tag": "1.2"}
    assert image.split("no-tag") is None
    url = Format.parse("{scheme}://{host}")
    assert url.split("https://harbor.example.com:8443/x") == {
        "scheme": "https",
        "host": "harbor.example.com:8443/x",
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{host}", "two placeholders"),
        ("{a}{b}", "need text between them"),
        ("{a}:{a}", "twice"),
        ("{a}:{b}}", "braces"),
    ],
)
def test_a_format_that_cannot_be_read_back_is_refused(text: str, problem: str) -> None:
    with pytest.raises(FormatError, match=problem):
        Format.parse(text)


@settings(deadline=None)
@given(st.text(max_size=8), st.text(max_size=8))
def test_cutting_what_was_joined_joins_back_the_same(first: str, second: str) -> None:
    form = Format.parse("{a}:{b}")
    joined = form.join({"a": first, "b": second})
    parts = form.split(joined)
    assert parts is not None
    assert form.join(parts) == joined


# ----- edits ---------------------------------------------------------------------------


def _sequential(
    obj: dict[str, Any], removals: list[paths.Path], placements: list[tuple[paths.Path, Any]]
) -> dict[str, Any]:
    """What `edit` must equal: each removal, then each placement, one at a time."""
    for path in removals:
        obj, _ = paths.removed(obj, path)
    for path, value in placements:
        obj = paths.placed(obj, path, value)
    return obj


SHORT_PATHS = st.lists(st.sampled_from("abc"), min_size=1, max_size=3).map(tuple)
NESTED = st.recursive(
    st.one_of(st.integers(0, 3), st.none()),
    lambda inner: st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
    max_leaves=8,
)


@settings(deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcd"), NESTED, max_size=3),
    st.lists(SHORT_PATHS, max_size=3, unique=True),
    st.lists(st.tuples(SHORT_PATHS, st.integers(5, 9)), max_size=3, unique_by=lambda p: p[0]),
)
def test_one_pass_of_edits_does_what_removing_then_placing_one_by_one_does(
    obj: dict[str, Any], removals: list[paths.Path], placements: list[tuple[paths.Path, Any]]
) -> None:
    assume(not any(paths.overlaps(a, b) and a != b for (a, _), (b, _) in _pairs(placements)))
    frozen = json.dumps(obj, sort_keys=True)
    try:
        expected: Any = _sequential(obj, removals, placements)
    except paths.Blocked:
        expected = paths.Blocked
    try:
        got: Any = paths.edit(obj, paths.edits_of(removals, placements))
    except paths.Blocked:
        got = paths.Blocked
    assert got == expected
    assert json.dumps(obj, sort_keys=True) == frozen  # the input is never changed


def _pairs(items: list[Any]) -> list[tuple[Any, Any]]:
    return [(a, b) for i, a in enumerate(items) for b in items[i + 1 :]]


# ----- rules -------------------------------------------------------------------------


def test_moves_splits_and_defaults_each_way() -> None:
    field_map = FieldMap(
        (
            Move(P("spec.size"), P("spec.replicas")),
            Split(
                P("spec.image"),
                {"repo": P("spec.repo"), "tag": P("spec.tag")},
                Format.parse("{repo}:{tag}"),
            ),
        ),
        (Default(HUB, P("spec.mode"), "fast"),),
    )
    spoke = {"spec": {"replicas": 3, "repo": "nginx", "tag": "1.27", "other": True}}
    hub = field_map.convert(spoke, HUB)
    assert hub == {"spec": {"size": 3, "image": "nginx:1.27", "mode": "fast", "other": True}}
    assert field_map.convert(hub, SPOKE) == {
        "spec": {"replicas": 3, "repo": "nginx", "tag": "1.27", "mode": "fast", "other": True}
    }
    assert spoke == {"spec": {"replicas": 3, "repo": "nginx", "tag": "1.27", "other": True}}


def test_a_rule_that_finds_nothing_leaves_the_object_alone() -> None:
    field_map = FieldMap(
        (Split(P("spec.url"), {"s": P("spec.s"), "h": P("spec.h")}, Format.parse("{s}://{h}")),)
    )
    odd = {"spec": {"url": "not a url"}}
    assert field_map.convert(odd, SPOKE) is odd
    assert field_map.convert({"status": {}}, HUB) == {"status": {}}


def test_a_place_taken_by_a_value_is_a_failure_naming_the_entry() -> None:
    convert = converter(FieldMap((Move(P("spec.a.b"), P("spec.x")),)))
    with pytest.raises(ConversionFailed) as failed:
        convert.convert_one(widget("v1", spec={"x": 1, "a": "text"}), "v2")
    assert "watches.yaml:3 (v1, fieldMap)" in str(failed.value)
    assert "spec.a holds a string" in str(failed.value)


def test_what_the_other_version_cannot_hold_travels_in_the_annotation() -> None:
    schemas = {
        "v2": {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "size": {"type": "integer"},
                        "tls": {"type": "object", "properties": {"secret": {"type": "string"}}},
                    },
                }
            },
        },
        "v1": {
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
            },
        },
    }
    convert = converter(FieldMap((Move(P("spec.size"), P("spec.replicas")),)), schemas)
    hub = widget("v2", spec={"size": 2, "tls": {"secret": "s"}})
    spoke = convert.convert_one(hub, "v1")
    assert spoke["spec"] == {"replicas": 2}
    kept = json.loads(spoke["metadata"]["annotations"]["conversion.ansible-operator.io/v2"])
    assert kept == {"/spec/tls": {"value": {"secret": "s"}}}
    assert convert.convert_one(spoke, "v2") == hub
    # changed through v1 since: the change wins, the rest comes back
    edited = {**spoke, "spec": {"replicas": 5}}
    assert convert.convert_one(edited, "v2")["spec"] == {"size": 5, "tls": {"secret": "s"}}


def test_a_kept_value_changed_through_the_other_version_is_not_restored() -> None:
    convert = converter(
        FieldMap(
            (Split(P("spec.url"), {"s": P("spec.s"), "h": P("spec.h")}, Format.parse("{s}://{h}")),)
        ),
        {
            "v2": None,
            "v1": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {"s": {"type": "string"}, "h": {"type": "string"}},
                    }
                },
            },
        },
    )
    hub = widget("v2", spec={"url": "plain"})  # no scheme: v1 cannot hold it
    spoke = convert.convert_one(hub, "v1")
    assert spoke["spec"] == {}
    assert convert.convert_one(spoke, "v2") == hub
    changed = {**spoke, "spec": {"s": "https", "h": "example.com"}}
    assert convert.convert_one(changed, "v2")["spec"] == {"url": "https://example.com"}


def test_a_stale_annotation_of_the_target_version_is_not_taken_for_data() -> None:
    convert = converter(FieldMap((Move(P("spec.size"), P("spec.replicas")),)))
    spoke = widget(
        "v1",
        metadata={"name": "w", "annotations": {"conversion.ansible-operator.io/v1": "junk"}},
        spec={"replicas": 1},
    )
    hub = convert.convert_one(spoke, "v2")
    assert hub["spec"] == {"size": 1}
    assert "annotations" not in hub["metadata"]


# ----- properties over generated maps and objects -------------------------------------

PATHS = st.lists(st.sampled_from(["p", "q", "r"]), min_size=1, max_size=3).map(
    lambda keys: ("spec", *keys)
)


@st.composite
def field_maps(draw: st.DrawFn) -> FieldMap:
    """Moves, splits and defaults whose places do not overlap on either side."""
    rules: list[Any] = []
    defaults: list[Default] = []
    taken: dict[str, list[paths.Path]] = {HUB: [], SPOKE: []}

    def free(side: str) -> paths.Path:
        path = draw(PATHS)
        assume(not any(paths.overlaps(path, other) for other in taken[side]))
        taken[side].append(path)
        return path

    for _ in range(draw(st.integers(0, 3))):
        choice = draw(st.sampled_from(["move", "split", "default"]))
        if choice == "move":
            rules.append(Move(free(HUB), free(SPOKE)))
        elif choice == "split":
            whole_side = draw(st.sampled_from([HUB, SPOKE]))
            whole = free(whole_side)
            parts = {"a": free(SPOKE if whole_side == HUB else HUB)}
            parts["b"] = free(SPOKE if whole_side == HUB else HUB)
            form = Format.parse(draw(st.sampled_from(["{a}:{b}", "{a}://{b}", "<{a}|{b}>"])))
            if whole_side == HUB:
                rules.append(Split(whole, parts, form))
            else:
                rules.append(Split(parts, whole, form))
        else:
            side = draw(st.sampled_from([HUB, SPOKE]))
            path = draw(PATHS)
            assume(not any(paths.overlaps(path, other) and path != other for other in taken[side]))
            assume(all(default.path != path or default.side != side for default in defaults))
            defaults.append(Default(side, path, draw(JSON)))  # type: ignore[arg-type]
    return FieldMap(tuple(rules), tuple(defaults))


BODIES = st.dictionaries(
    st.sampled_from(["spec", "status", "data"]),
    st.recursive(
        st.one_of(JSON, st.text(max_size=6).map(lambda t: f"x:{t}")),
        lambda inner: st.dictionaries(
            st.one_of(st.sampled_from(["p", "q", "r"]), KEYS), inner, max_size=3
        ),
        max_leaves=10,
    ),
    max_size=3,
)


@settings(
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(field_maps(), BODIES, METADATA, st.sampled_from(["v1", "v2"]))
def test_any_object_converted_to_the_other_version_and_back_is_the_same(
    field_map: FieldMap, body: dict[str, Any], metadata: dict[str, Any], start: str
) -> None:
    convert = converter(field_map)
    other = "v1" if start == "v2" else "v2"
    obj = {"apiVersion": f"example.com/{start}", "kind": "Widget", "metadata": metadata, **body}
    frozen = json.dumps(obj, sort_keys=True)
    try:
        there = convert.convert_one(obj, other)
    except ConversionFailed:
        assume(False)  # a rule's place holds a value that is no mapping: refused, not lost
        raise
    assert there["apiVersion"] == f"example.com/{other}"
    assert convert.convert_one(there, start) == obj
    assert json.dumps(obj, sort_keys=True) == frozen


# ----- the sample: HarborCluster v1beta1 <-> v1alpha3 ---------------------------------

SAMPLE_CRD = yaml.safe_load((ROOT / "config/crd/bases/goharbor.io_harborclusters.yaml").read_text())
SAMPLE_SCHEMAS = version_schemas(SAMPLE_CRD)


def sample_converter() -> Converter:
    declared = load_watches_file(ROOT / "watches.yaml", env={}, cwd=ROOT).conversions
    [harbor] = [each for each in declared if each.kind == "HarborCluster"]
    return Converter(harbor, SAMPLE_SCHEMAS)


SAMPLE = sample_converter()
THOROUGH = sample_converter()
THOROUGH.shortcut = False


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["v1beta1", "v1alpha3"]).flatmap(
        lambda version: objects_of(
            f"goharbor.io/{version}", "HarborCluster", SAMPLE_SCHEMAS[version]
        )
    )
)
def test_a_sample_harbor_cluster_read_through_the_other_version_comes_back_the_same(
    obj: dict[str, Any],
) -> None:
    start = obj["apiVersion"].rpartition("/")[2]
    other = "v1alpha3" if start == "v1beta1" else "v1beta1"
    there = SAMPLE.convert_one(obj, other)
    # nothing of the answer is left for the API server's pruning to drop silently
    assert prune(there, SAMPLE_SCHEMAS[other], root=True) == there
    assert SAMPLE.convert_one(there, start) == obj


def test_the_sample_moves_its_dependencies_and_splits_its_url() -> None:
    old = {
        "apiVersion": "goharbor.io/v1alpha3",
        "kind": "HarborCluster",
        "metadata": {"name": "reg", "namespace": "team-a"},
        "spec": {
            "version": "2.9.0",
            "expose": {"scheme": "https", "host": "harbor.example.com:8443"},
            "inClusterDatabase": {"postgresSqlSpec": {"replicas": 2, "storage": "5Gi"}},
            "inClusterCache": {
                "redisSpec": {"server": {"replicas": 3}, "sentinel": {"replicas": 3}}
            },
            "inClusterStorage": {"minIOSpec": {"replicas": 4, "volumesPerServer": 2}},
        },
    }
    new = SAMPLE.convert_one(old, "v1beta1")
    assert new["apiVersion"] == "goharbor.io/v1beta1"
    assert new["spec"] == {
        "version": "2.9.0",
        "externalURL": "https://harbor.example.com:8443",
        "database": {"replicas": 2, "storage": "5Gi", "version": "15"},
        "cache": {"replicas": 3, "sentinelReplicas": 3},
        "storage": {"servers": 4, "volumesPerServer": 2},
    }
    assert "annotations" not in new["metadata"]


def test_a_review_mixing_versions_is_answered_in_order() -> None:
    hub = {
        "apiVersion": "goharbor.io/v1beta1",
        "kind": "HarborCluster",
        "metadata": {"name": "a", "uid": "1", "resourceVersion": "5"},
        "spec": {"version": "2", "externalURL": "http://a"},
    }
    old = SAMPLE.convert_one(hub, "v1alpha3")
    converted = asyncio.run(SAMPLE.convert([hub, old, hub], "v1alpha3"))
    assert [each["apiVersion"] for each in converted] == ["goharbor.io/v1alpha3"] * 3
    assert converted[0] == converted[2] == old
    assert converted[1] is old  # already in the version asked


def test_a_stored_object_converted_again_is_remembered_but_new_content_is_not() -> None:
    convert = sample_converter()
    hub = {
        "apiVersion": "goharbor.io/v1beta1",
        "kind": "HarborCluster",
        "metadata": {"name": "a", "uid": "1", "resourceVersion": "5"},
        "spec": {"version": "2", "externalURL": "http://a"},
    }
    first = asyncio.run(convert.convert([hub], "v1alpha3"))
    again = asyncio.run(convert.convert([json.loads(json.dumps(hub))], "v1alpha3"))
    assert again == first and convert.hits == 1
    # an update's object carries the resourceVersion it is based on, with new content
    changed = {**hub, "spec": {"version": "3", "externalURL": "http://a"}}
    [converted] = asyncio.run(convert.convert([changed], "v1alpha3"))
    assert converted["spec"]["version"] == "3" and convert.hits == 1


def test_a_version_with_no_conversion_is_refused_naming_the_entry() -> None:
    stray = {"apiVersion": "goharbor.io/v2", "kind": "HarborCluster", "metadata": {"name": "x"}}
    with pytest.raises(ConversionFailed) as failed:
        asyncio.run(SAMPLE.convert([stray], "v1beta1"))
    assert "watches.yaml:" in str(failed.value)
    assert "no conversion is declared for version v2" in str(failed.value)


def test_the_annotation_names_the_version_whose_fields_it_keeps() -> None:
    assert fidelity.annotation("v1beta1") == "conversion.ansible-operator.io/v1beta1"


@settings(
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(field_maps(), BODIES, METADATA, st.sampled_from(["v1", "v2"]))
def test_the_shortcut_past_the_way_back_answers_as_the_way_back_does(
    field_map: FieldMap, body: dict[str, Any], metadata: dict[str, Any], start: str
) -> None:
    """The converter skips converting back when the rules say it would give the object
    again and nothing was pruned; it must answer exactly as converting back does."""
    quick, thorough = converter(field_map), converter(field_map)
    thorough.shortcut = False
    obj = {"apiVersion": f"example.com/{start}", "kind": "Widget", "metadata": metadata, **body}
    other = "v1" if start == "v2" else "v2"
    try:
        expected = thorough.convert_one(obj, other)
    except ConversionFailed:
        assume(False)
        raise
    assert quick.convert_one(obj, other) == expected


@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["v1beta1", "v1alpha3"]).flatmap(
        lambda version: objects_of(
            f"goharbor.io/{version}", "HarborCluster", SAMPLE_SCHEMAS[version]
        )
    )
)
def test_the_shortcut_answers_as_the_way_back_for_the_sample(obj: dict[str, Any]) -> None:
    thorough = THOROUGH
    other = "v1alpha3" if obj["apiVersion"].endswith("v1beta1") else "v1beta1"
    assert SAMPLE.convert_one(obj, other) == thorough.convert_one(obj, other)
