"""Owner references and owner annotations: decisions and edits as pure functions.

Where Kubernetes allows an ownerReference (the owner is cluster-scoped, or
both live in one namespace), a dependent gets one with `controller: true` and
`blockOwnerDeletion: true`. Otherwise (a namespaced owner and a cluster-scoped
dependent, or one in another namespace) it gets the reference's annotations,
which our dependent watches map back to the owner.

Only what a run creates is marked. A write that replaces or applies an object
that already exists keeps our mark if the object carries it, and otherwise
leaves the object's ownership alone: adopting a hand-made object would let the
garbage collector delete it with the custom object (Operator SDK, too, marks
only what a run creates).

In a shard ring, what a run marks also gets the label `OWNER_SHARD_LABEL`
(kube/shard_keys.py) with its owner's bucket, by which the replica that
reconciles the owner watches it (and the others do not); an object that
carries our mark without it (made before the ring, or by an older version)
gets it at its owner's next run that writes it, a merge patch included.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.kube.shard_keys import OWNER_SHARD_LABEL, owner_shard_label
from ansible_operator.kube.types import Owner, group_of

PRIMARY_RESOURCE = "operator-sdk/primary-resource"
PRIMARY_RESOURCE_TYPE = "operator-sdk/primary-resource-type"


@dataclass(frozen=True)
class Injection:
    body: dict[str, Any]
    changed: bool
    note: str = ""  # why we left it alone, for the log


def owner_reference(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def primary_resource_type(owner: Owner) -> str:
    return f"{owner.kind}.{owner.group}" if owner.group else owner.kind


def owner_annotations(owner: Owner) -> dict[str, str]:
    where = f"{owner.namespace}/{owner.name}" if owner.namespace else owner.name
    return {PRIMARY_RESOURCE: where, PRIMARY_RESOURCE_TYPE: primary_resource_type(owner)}


def can_own(owner: Owner, dependent_namespace: str | None) -> bool:
    """Kubernetes allows an ownerReference from a namespaced dependent to an owner
    in its own namespace or a cluster-scoped owner; a cluster-scoped dependent
    only to a cluster-scoped owner."""
    if not owner.namespace:
        return True
    return dependent_namespace == owner.namespace


def inject(
    body: Mapping[str, Any],
    owner: Owner,
    dependent_namespace: str | None,
    *,
    shard_label: bool = False,
) -> Injection:
    """Return `body` with our ownership marked (and, with `shard_label`, the
    owner's shard labelled), never taking an object that another controller
    already owns."""
    updated = copy.deepcopy(dict(body))
    metadata = updated.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return Injection(dict(body), False, "metadata is not an object")
    marked, refusal = _mark(metadata, owner, dependent_namespace)
    if refusal:
        return Injection(dict(body), False, refusal)
    labelled = shard_label and _label_shard(metadata, owner)
    return Injection(updated, marked or labelled)


def _mark(
    metadata: dict[str, Any], owner: Owner, dependent_namespace: str | None
) -> tuple[bool, str]:
    """Our ownerReference or annotations written into `metadata`: (whether
    it changed, why not when it may not be)."""
    if can_own(owner, dependent_namespace):
        references = list(metadata.get("ownerReferences") or [])
        ours = owner_reference(owner)
        for index, reference in enumerate(references):
            if not isinstance(reference, Mapping):
                continue
            if reference.get("uid") == owner.uid:
                merged = {**reference, **ours}
                if merged == reference:
                    return False, ""
                references[index] = merged
                metadata["ownerReferences"] = references
                return True, ""
            if reference.get("controller"):
                return False, (
                    f"already controlled by {reference.get('kind')} {reference.get('name')} "
                    f"(uid {reference.get('uid')}); not adding ours"
                )
        references.append(ours)
        metadata["ownerReferences"] = references
        return True, ""
    annotations = dict(metadata.get("annotations") or {})
    wanted = owner_annotations(owner)
    if all(annotations.get(key) == value for key, value in wanted.items()):
        return False, ""
    annotations.update(wanted)
    metadata["annotations"] = annotations
    return True, ""


def _label_shard(metadata: dict[str, Any], owner: Owner) -> bool:
    """The owner's shard label written into `metadata`: whether it changed."""
    labels = metadata.get("labels")
    if labels is None:
        labels = metadata["labels"] = {}
    if not isinstance(labels, dict):
        return False  # not ours to repair: the server refuses it anyway
    wanted = owner_shard_label(owner.uid)
    if labels.get(OWNER_SHARD_LABEL) == wanted:
        return False
    labels[OWNER_SHARD_LABEL] = wanted
    return True


def shard_labelled(obj: Mapping[str, Any] | None, owner: Owner) -> bool:
    """Whether `obj` (an object, or a patch) carries the owner's shard label."""
    metadata = (obj or {}).get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if not isinstance(labels, Mapping):
        return False
    return labels.get(OWNER_SHARD_LABEL) == owner_shard_label(owner.uid)


def label_patch(patch: Mapping[str, Any], owner: Owner) -> dict[str, Any] | None:
    """A merge patch that also sets the owner's shard label, or None when the
    patch's metadata or labels are not objects (left as they are)."""
    updated = copy.deepcopy(dict(patch))
    metadata = updated.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return None
    labels = metadata.setdefault("labels", {})
    if not isinstance(labels, dict):
        return None  # `labels: null` drops them all: not ours to undo
    labels[OWNER_SHARD_LABEL] = owner_shard_label(owner.uid)
    return updated


def patch_removes_ours(patch: Mapping[str, Any], owner: Owner) -> bool:
    """A merge or strategic patch that sets ownerReferences to a list without
    ours, or drops or changes our owner annotations."""
    metadata = patch.get("metadata")
    if not isinstance(metadata, Mapping):
        return False
    if "ownerReferences" in metadata:
        references = metadata.get("ownerReferences") or []
        if not any(
            isinstance(reference, Mapping) and reference.get("uid") == owner.uid
            for reference in references
        ):
            return True
    if "annotations" in metadata:
        annotations = metadata.get("annotations")
        if not isinstance(annotations, Mapping):
            return True  # `annotations: null` drops them all
        wanted = owner_annotations(owner)
        return any(key in annotations and annotations[key] != wanted[key] for key in wanted)
    return False


def carries_ours(obj: Mapping[str, Any] | None, owner: Owner) -> bool:
    """Whether `obj` is marked as `owner`'s: our ownerReference or our annotations."""
    metadata = (obj or {}).get("metadata")
    if not isinstance(metadata, Mapping):
        return False
    for reference in metadata.get("ownerReferences") or []:
        if isinstance(reference, Mapping) and reference.get("uid") == owner.uid:
            return True
    annotations = metadata.get("annotations")
    if not isinstance(annotations, Mapping):
        return False
    return all(annotations.get(key) == value for key, value in owner_annotations(owner).items())


def mark_write(
    body: Mapping[str, Any],
    owner: Owner,
    dependent_namespace: str | None,
    *,
    existing: Mapping[str, Any] | None,
    shard_label: bool = False,
) -> Injection:
    """Our mark for a write that may create or update: `existing` is the object
    as it is now (None when absent, so the write creates it). Marked when it
    creates, or when the object already carries our mark (a replace or apply
    without it would drop it); left alone otherwise, never adopted."""
    if existing is None or carries_ours(existing, owner):
        return inject(body, owner, dependent_namespace, shard_label=shard_label)
    return Injection(
        dict(body),
        False,
        "it exists without our owner reference (not created by a run of this owner); "
        "left unowned, never adopted",
    )


def owner_key_from(
    obj: Mapping[str, Any], owner_group: str, owner_kind: str, *, owner_namespaced: bool = True
) -> tuple[str, str] | None:
    """(namespace, name) of the owner of kind `owner_kind`.`owner_group` that
    this dependent points to: its controller ownerReference, else our annotations."""
    metadata = obj.get("metadata") or {}
    for reference in metadata.get("ownerReferences") or []:
        if not isinstance(reference, Mapping) or not reference.get("controller"):
            continue
        group = group_of(str(reference.get("apiVersion", "")))
        if reference.get("kind") == owner_kind and group == owner_group:
            namespace = metadata.get("namespace") or "" if owner_namespaced else ""
            return (namespace, str(reference.get("name")))
    annotations = metadata.get("annotations") or {}
    wanted_type = f"{owner_kind}.{owner_group}" if owner_group else owner_kind
    if annotations.get(PRIMARY_RESOURCE_TYPE) == wanted_type and annotations.get(PRIMARY_RESOURCE):
        namespace, _, name = str(annotations[PRIMARY_RESOURCE]).rpartition("/")
        return (namespace, name)
    return None
