"""Owner references and annotations: when each applies, and never stealing."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.kube.types import Owner
from ansible_operator.proxy import ownership

NAMESPACED = Owner("cache.example.com", "v1", "Memcached", "team", "mc", "uid-1")
CLUSTER = Owner("example.com", "v1", "Platform", "", "p", "uid-2")


def body(namespace: str | None = "team", **metadata: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "dep", **metadata}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def test_same_namespace_dependent_gets_a_controller_owner_reference() -> None:
    result = ownership.inject(body(), NAMESPACED, "team")
    assert result.changed
    assert result.body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "cache.example.com/v1",
            "kind": "Memcached",
            "name": "mc",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


@pytest.mark.parametrize(("owner", "namespace"), [(CLUSTER, "team"), (CLUSTER, None)])
def test_cluster_scoped_owner_owns_anything(owner: Owner, namespace: str | None) -> None:
    result = ownership.inject(body(namespace), owner, namespace)
    assert result.body["metadata"]["ownerReferences"][0]["uid"] == "uid-2"


@pytest.mark.parametrize("namespace", ["other", None])
def test_cross_namespace_or_cluster_scoped_dependent_gets_annotations(
    namespace: str | None,
) -> None:
    result = ownership.inject(body(namespace), NAMESPACED, namespace)
    assert "ownerReferences" not in result.body["metadata"]
    assert result.body["metadata"]["annotations"] == {
        "operator-sdk/primary-resource": "team/mc",
        "operator-sdk/primary-resource-type": "Memcached.cache.example.com",
    }


def test_an_object_controlled_by_another_owner_is_not_stolen() -> None:
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "x",
        "uid": "other",
        "controller": True,
    }
    result = ownership.inject(body(ownerReferences=[theirs]), NAMESPACED, "team")
    assert not result.changed
    assert result.body["metadata"]["ownerReferences"] == [theirs]
    assert "already controlled by Deployment x" in result.note


def test_a_non_controller_reference_is_kept_beside_ours() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}
    result = ownership.inject(body(ownerReferences=[other]), NAMESPACED, "team")
    assert [r["uid"] for r in result.body["metadata"]["ownerReferences"]] == ["u", "uid-1"]


def test_our_reference_already_present_is_a_no_op() -> None:
    present = ownership.inject(body(), NAMESPACED, "team").body
    assert not ownership.inject(present, NAMESPACED, "team").changed


def test_patch_removing_our_reference_is_detected() -> None:
    assert ownership.patch_removes_ours({"metadata": {"ownerReferences": []}}, NAMESPACED)
    assert not ownership.patch_removes_ours({"metadata": {"labels": {}}}, NAMESPACED)
    keeps = {"metadata": {"ownerReferences": [ownership.owner_reference(NAMESPACED)]}}
    assert not ownership.patch_removes_ours(keeps, NAMESPACED)


def test_owner_found_from_reference_or_annotations() -> None:
    referenced = ownership.inject(body(), NAMESPACED, "team").body
    assert ownership.owner_key_from(referenced, "cache.example.com", "Memcached") == ("team", "mc")
    annotated = ownership.inject(body("other"), NAMESPACED, "other").body
    assert ownership.owner_key_from(annotated, "cache.example.com", "Memcached") == ("team", "mc")
    assert ownership.owner_key_from(annotated, "cache.example.com", "Other") is None
    by_cluster_owner = ownership.inject(body("team"), CLUSTER, "team").body
    assert ownership.owner_key_from(
        by_cluster_owner, "example.com", "Platform", owner_namespaced=False
    ) == ("", "p")


def test_patch_dropping_our_annotations_is_detected() -> None:
    wanted = ownership.owner_annotations(NAMESPACED)
    assert ownership.patch_removes_ours({"metadata": {"annotations": None}}, NAMESPACED)
    dropped = {"metadata": {"annotations": {ownership.PRIMARY_RESOURCE: None}}}
    assert ownership.patch_removes_ours(dropped, NAMESPACED)
    assert not ownership.patch_removes_ours({"metadata": {"annotations": wanted}}, NAMESPACED)
    assert not ownership.patch_removes_ours({"metadata": {"annotations": {"a": "b"}}}, NAMESPACED)


@pytest.mark.parametrize(
    ("existing", "namespace", "marked"),
    [
        (None, "team", True),  # the write creates it
        ({"metadata": {"name": "dep"}}, "team", False),  # made by hand: never adopted
        (ownership.inject(body(), NAMESPACED, "team").body, "team", True),  # ours: kept
        (None, "other", True),  # created across namespaces: annotations
        ({"metadata": {"name": "dep", "annotations": {"x": "y"}}}, "other", False),
        (ownership.inject(body("other"), NAMESPACED, "other").body, "other", True),
    ],
)
def test_a_replace_or_apply_marks_only_what_it_creates_or_what_is_ours(
    existing: dict[str, Any] | None, namespace: str, marked: bool
) -> None:
    result = ownership.mark_write(body(namespace), NAMESPACED, namespace, existing=existing)
    assert ownership.carries_ours(result.body, NAMESPACED) is marked
    if not marked:
        assert not result.changed
        assert "never adopted" in result.note


def test_another_owner_of_the_same_kind_does_not_count_as_ours() -> None:
    someone_elses = ownership.inject(
        body(), Owner("cache.example.com", "v1", "Memcached", "team", "other", "uid-9"), "team"
    ).body
    assert not ownership.carries_ours(someone_elses, NAMESPACED)
    assert not ownership.mark_write(body(), NAMESPACED, "team", existing=someone_elses).changed
