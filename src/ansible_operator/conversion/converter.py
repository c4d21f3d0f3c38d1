"""One kind's conversions at work: any declared version to any other, through the hub.

A field map converts in this process (`convert_one`, fidelity included: what the target
cannot hold is kept in an annotation, fidelity.py); a role converts a batch in one run,
through the callback `convert` is given (webhooks/conversion_runs.py), and is trusted to be
lossless itself. Whatever converted, the output is checked before anyone sees it (`checked`):
one object for each given, in order, in the version asked, of the same kind, with the same
uid, name and namespace and no other change to metadata than labels and annotations (what
the API server would refuse, with a message naming no one). A failure is a ConversionFailed
naming the watches.yaml entry, which the review answers with.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ansible_operator.conversion import fidelity
from ansible_operator.conversion.field_map import HUB, SPOKE, FieldMap
from ansible_operator.conversion.kinds import KindConversion, VersionConversion
from ansible_operator.conversion.paths import Blocked, Path, same
from ansible_operator.conversion.schema import Moved, Schema, moved_trie, prune

# A role's batch: (the version's entry, objects, the version they go to) -> converted.
RunRole = Callable[[VersionConversion, list[dict[str, Any]], str], Awaitable[list[dict[str, Any]]]]
METADATA_MAY_CHANGE = frozenset({"labels", "annotations"})
# Converted objects remembered by (uid, resourceVersion, target version), each with the
# object it was converted from (a request's object may carry the resourceVersion it is
# based on with new content: a hit must also be the same content). The API server
# converts the same stored object again for every list and watcher of another version
# (kube-controller-manager's garbage collector watches each kind in its group's
# preferred version): a role is not run again for what it already converted.
REMEMBERED = 4096


class ConversionFailed(Exception):
    """A review this kind's conversions cannot answer; the message names the entry."""


def version_of(obj: Any, group: str) -> str | None:
    api_version = obj.get("apiVersion") if isinstance(obj, dict) else None
    if not isinstance(api_version, str):
        return None
    found_group, _, version = api_version.rpartition("/")
    return version if found_group == group and version else None


class Converter:
    def __init__(
        self, declared: KindConversion, schemas: dict[str, Schema | None] | None = None
    ) -> None:
        self.declared = declared
        self.schemas: dict[str, Schema | None] = dict(schemas or {})
        self._moved: dict[tuple[str, str], Moved] = {}
        # False: always convert back to find what is lost (tests compare both ways).
        self.shortcut = True
        self._remembered: OrderedDict[
            tuple[str, str, str], tuple[dict[str, Any], dict[str, Any]]
        ] = OrderedDict()
        self.hits = 0

    @property
    def hub(self) -> str:
        return self.declared.hub

    def set_schemas(self, schemas: dict[str, Schema | None]) -> None:
        """The versions' schemas as the CRD now has them (it may change while we run)."""
        if schemas != self.schemas:
            self.schemas = dict(schemas)
            self._remembered.clear()

    def _entry(self, version: str, obj: dict[str, Any]) -> VersionConversion | None:
        if version == self.hub:
            return None
        entry = self.declared.version(version)
        if entry is None:
            raise ConversionFailed(
                f"{self.declared.describe()}: no conversion is declared for version "
                f"{version} of {_named(obj)} (declared: {', '.join(self.declared.version_names)})"
            )
        return entry

    def in_process(self, source: str, target: str) -> bool:
        """Whether every step from `source` to `target` is a field map (or none)."""
        for version in (source, target):
            if version != self.hub:
                entry = self.declared.version(version)
                if entry is None or entry.field_map is None:
                    return False
        return True

    # ----- field maps, with fidelity ----------------------------------------------------

    def _map(self, body: dict[str, Any], source: str, target: str) -> dict[str, Any]:
        for version, towards in ((source, HUB), (target, SPOKE)):
            if version == self.hub:
                continue
            entry = self.declared.version(version)
            assert entry is not None and entry.field_map is not None
            try:
                body = entry.field_map.convert(body, towards)
            except Blocked as blocked:
                raise ConversionFailed(f"{entry.describe()}: {blocked}") from None
        return body

    def _moved_paths(self, source: str, target: str) -> Moved:
        """Where a conversion from `source` to `target` may write (the schema of `source`
        says nothing of what lands there)."""
        key = (source, target)
        if key not in self._moved:
            paths: list[Path] = []
            for version, towards in ((source, HUB), (target, SPOKE)):
                entry = self.declared.version(version) if version != self.hub else None
                if entry is not None and entry.field_map is not None:
                    paths += _targets(entry.field_map, towards)
            self._moved[key] = moved_trie(paths)
        return self._moved[key]

    def convert_one(self, obj: dict[str, Any], target: str) -> dict[str, Any]:
        """`obj` in version `target`, by field maps; ConversionFailed if it cannot be."""
        source = version_of(obj, self.declared.group)
        if source is None:
            raise ConversionFailed(
                f"{self.declared.describe()}: {_named(obj)} has apiVersion "
                f"{obj.get('apiVersion')!r}, not one of group {self.declared.group}"
            )
        if source == target:
            return obj
        self._entry(source, obj)
        self._entry(target, obj)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        kept = fidelity.decode(annotations.get(fidelity.annotation(target)))
        body = obj
        stale = [
            key
            for key in (fidelity.annotation(target), fidelity.annotation(source))
            if key in annotations
        ]
        if stale:
            body = fidelity.with_annotations(obj, dict.fromkeys(stale))
        sure = False
        if kept is None and (source == self.hub) != (target == self.hub) and self.shortcut:
            # One field map: it may know the way back gives `body` again (field_map.py).
            spoke = self.declared.version(target if source == self.hub else source)
            assert spoke is not None and spoke.field_map is not None
            try:
                mapped, sure = spoke.field_map.convert_checked(
                    body, SPOKE if source == self.hub else HUB
                )
            except Blocked as blocked:
                raise ConversionFailed(f"{spoke.describe()}: {blocked}") from None
        else:
            mapped = self._map(body, source, target)
        out = prune(
            mapped,
            self.schemas.get(target),
            known=self.schemas.get(source),
            moved=self._moved_paths(source, target),
            root=True,
        )
        if kept:  # what a conversion out of `target` could not carry (valid in `target`)
            out = fidelity.restore(out, kept)
        out = {**out, "apiVersion": self.declared.api_version(target)}
        if sure and out.keys() == mapped.keys() and _unpruned(out, mapped):
            return out  # nothing pruned, and the rules give it back: nothing lost
        back = self._map(out, target, source)
        back = prune(
            back,
            self.schemas.get(source),
            known=self.schemas.get(target),
            moved=self._moved_paths(target, source),
            root=True,
        )
        lost = fidelity.losses(body, back)
        if lost:
            out = fidelity.with_annotations(
                out, {fidelity.annotation(source): fidelity.encode(lost)}
            )
            if fidelity.annotations_size(out) > fidelity.MAX_ANNOTATIONS:
                raise ConversionFailed(
                    f"{self.declared.describe()}: what version {target} cannot hold of "
                    f"{_named(obj)} does not fit in its annotations (256 KiB): add its "
                    f"fields to {target}'s schema, or map them in the fieldMap"
                )
        return out

    def _key(self, obj: dict[str, Any], target: str) -> tuple[str, str, str] | None:
        metadata = obj.get("metadata")
        uid = metadata.get("uid") if isinstance(metadata, dict) else None
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if not (isinstance(uid, str) and uid and isinstance(version, str) and version):
            return None
        return (uid, version, target)

    def _recall(self, obj: dict[str, Any], target: str) -> dict[str, Any] | None:
        """`obj` as converted to `target` before: a stored object (a uid and a
        resourceVersion) with the same content (see REMEMBERED)."""
        key = self._key(obj, target)
        found = self._remembered.get(key) if key is not None else None
        if found is None or not same(found[0], obj):
            return None
        self._remembered.move_to_end(key)  # type: ignore[arg-type]
        self.hits += 1
        return found[1]

    def _remember(self, obj: dict[str, Any], target: str, converted: dict[str, Any]) -> None:
        key = self._key(obj, target)
        if key is None:
            return
        self._remembered[key] = (obj, converted)
        if len(self._remembered) > REMEMBERED:
            self._remembered.popitem(last=False)

    def _convert_remembered(self, obj: dict[str, Any], target: str) -> dict[str, Any]:
        found = self._recall(obj, target)
        if found is not None:
            return found
        converted = self.convert_one(obj, target)
        self._remember(obj, target, converted)
        return converted

    # ----- a review -----------------------------------------------------------------------

    async def convert(
        self,
        objects: Sequence[dict[str, Any]],
        target: str,
        run_role: RunRole | None = None,
    ) -> list[dict[str, Any]]:
        """Every object in version `target`, in order; ConversionFailed naming the entry
        when one cannot be (or a role's output is not what was asked)."""
        if target not in self.declared.version_names:
            raise ConversionFailed(
                f"{self.declared.describe()}: asked for version {target}, which has no "
                f"conversion declared (declared: {', '.join(self.declared.version_names)})"
            )
        out: list[dict[str, Any] | None] = [None] * len(objects)
        to_hub: dict[str, list[int]] = {}  # role-converted versions: their objects
        for index, obj in enumerate(objects):
            source = version_of(obj, self.declared.group)
            if source is not None and self.in_process(source, target):
                out[index] = self._convert_remembered(obj, target)
                continue
            if source is not None and source != target:
                # A role's output too: a conversion is a function of the object alone.
                out[index] = self._recall(obj, target)
                if out[index] is not None:
                    continue
            if source is None:
                self.convert_one(obj, target)  # raises, naming the problem
            assert source is not None
            self._entry(source, obj)
            to_hub.setdefault(source, []).append(index)
        if not to_hub:
            return [each for each in out if each is not None]
        if run_role is None:
            raise ConversionFailed(f"{self.declared.describe()}: roles cannot convert here")
        hubbed: dict[int, dict[str, Any]] = {}
        for source, indexes in to_hub.items():
            given = [objects[index] for index in indexes]
            entry = self.declared.version(source)
            if source == self.hub:
                converted = list(given)
            elif entry is not None and entry.role is not None:
                converted = checked(
                    entry, given, await run_role(entry, given, self.hub), self.hub, self.declared
                )
            else:
                converted = [self.convert_one(obj, self.hub) for obj in given]
            hubbed.update(zip(indexes, converted, strict=True))
        order = sorted(hubbed)
        entry = self.declared.version(target)
        given = [hubbed[index] for index in order]
        if target == self.hub:
            converted = given
        elif entry is not None and entry.role is not None:
            converted = checked(
                entry, given, await run_role(entry, given, target), target, self.declared
            )
        else:
            converted = [self.convert_one(obj, target) for obj in given]
        for index, obj in zip(order, converted, strict=True):
            out[index] = obj
            self._remember(objects[index], target, obj)
        return [each for each in out if each is not None]


def _unpruned(out: dict[str, Any], mapped: dict[str, Any]) -> bool:
    """Whether pruning kept everything of `mapped` (it returns what it did not change)."""
    return all(out[key] is value for key, value in mapped.items() if key not in ("apiVersion",))


def _targets(field_map: FieldMap, towards: str) -> list[Path]:
    paths: list[Path] = []
    for rule in field_map.rules:
        paths += rule.paths(towards).values()  # type: ignore[arg-type]
    paths += [default.path for default in field_map.defaults if default.side == towards]
    return paths


def _named(obj: Any) -> str:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    name = metadata.get("name") or metadata.get("generateName") or "?"
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def checked(
    entry: VersionConversion,
    given: Sequence[dict[str, Any]],
    returned: Any,
    target: str,
    declared: KindConversion,
) -> list[dict[str, Any]]:
    """`returned` if it is `given` converted to `target` (see the module), else
    ConversionFailed naming `entry` and the first problem."""
    where = entry.describe()
    if not isinstance(returned, list):
        raise ConversionFailed(f"{where}: the conversion returned no list of objects")
    if len(returned) != len(given):
        raise ConversionFailed(
            f"{where}: {len(given)} objects given, {len(returned)} returned (return every "
            "object, in the order given)"
        )
    wanted = declared.api_version(target)
    for index, (before, after) in enumerate(zip(given, returned, strict=True)):
        problem = _problem(before, after, wanted)
        if problem is not None:
            raise ConversionFailed(f"{where}: object {index + 1} ({_named(before)}): {problem}")
    return list(returned)


def _problem(before: dict[str, Any], after: Any, wanted: str) -> str | None:
    if not isinstance(after, dict):
        return "the conversion returned no object for it"
    if after.get("apiVersion") != wanted:
        return f"apiVersion is {after.get('apiVersion')!r}, not {wanted!r}"
    if after.get("kind") != before.get("kind"):
        return f"kind is {after.get('kind')!r}, not {before.get('kind')!r}"
    old = before.get("metadata") if isinstance(before.get("metadata"), dict) else {}
    new = after.get("metadata")
    if not isinstance(new, dict):
        return "metadata is missing"
    for key in ("uid", "name", "namespace"):
        if new.get(key) != old.get(key):
            return (
                f"metadata.{key} changed from {old.get(key)!r} to {new.get(key)!r} (a "
                "conversion may change labels and annotations only)"
            )
    for key in (old.keys() | new.keys()) - METADATA_MAY_CHANGE:
        if old.get(key) != new.get(key):
            return f"metadata.{key} changed (a conversion may change labels and annotations only)"
    for key in METADATA_MAY_CHANGE:
        value = new.get(key)
        if value is not None and (
            not isinstance(value, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ):
            return f"metadata.{key} must map strings to strings"
    return None
