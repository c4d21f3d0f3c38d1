"""What an informer keeps of each object (controller-runtime's cache transform,
`cache.TransformStripManagedFields`), and how a read gets the rest back.

Dropped from the stored copy, as items enter the store (`Informer._relist`,
`_apply`, `remember`), before any listener sees them:

- `metadata.managedFields`: the API server's field ownership, a tree of
  `f:<name>` keys as deep as the object itself, one per manager. In a Python
  dict it is commonly the biggest part of an object (every `{}` leaf is a dict
  of its own). Nothing in the operator reads it; predicates ignore it.
- the `kubectl.kubernetes.io/last-applied-configuration` annotation: a JSON
  string repeating the whole applied manifest.

Shared rather than dropped: field names. Each watch event is decoded on its
own, so each object would hold its own "metadata", "lastTransitionTime"...;
the stored copy takes its keys from one bounded table (`_share_keys`).

Measured (bench/cache_memory.py, a custom object as `kubectl apply` and a few
reconciles leave it): 13.2 kB held per object before, 4.6 kB after.

Not dropped, on purpose: the stored copy is a run's cached read too.

- The API proxy answers runs' GET and LIST from these stores (proxy/rules/
  cache_read.py), and the reconciler passes the whole object to the role
  (`_<group>_<kind>`). kubernetes.core's `k8s` with `apply: true` is a
  client-side apply: it reads the existing object's last-applied annotation
  to find the fields the new manifest no longer has; without it a removed
  field would silently stay. A role may also read `managedFields` with
  `k8s_info`. So what is dropped is kept beside the store, packed (compact
  JSON, zlib: the `f:` trees compress well), and `Informer.get`/`list` put it
  back: every read answers exactly what the API server would, and the proxy
  keeps its cache hits. Making those reads cache misses instead would send
  nearly every read to the server (every object has managedFields), and
  keeping the dropped parts as dicts is what costs the memory.
- `status`: the dependent predicates (watchDependentStatus) and runs read it.
- Secrets' and ConfigMaps' `data`: runs read them through the proxy
  (controller-runtime operators drop them when nothing reads them; here a
  role may). A store of metadata only (controller-runtime's metadata-only
  watches) would do for dependents' events, but not for the proxy's reads.
- `uid`, `ownerReferences`, `labels`, `generation`, `creationTimestamp`,
  `deletionTimestamp`, `finalizers`: handlers, predicates, finalizers and
  metrics read them.
"""

from __future__ import annotations

import json
import sys
import zlib
from dataclasses import dataclass
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True, slots=True)
class Removed:
    """What `strip` took from one object, packed: a few hundred bytes where
    the dicts took kilobytes."""

    packed: bytes

    def unpack(self) -> dict[str, Any]:
        unpacked: dict[str, Any] = json.loads(zlib.decompress(self.packed))
        return unpacked


def transform(obj: dict[str, Any]) -> tuple[dict[str, Any], Removed | None, int]:
    """What the store keeps of `obj` (fresh from the decoder: `strip` changes it),
    what `restore` needs to give the rest back, and the estimated bytes held."""
    removed = strip(obj)
    kept, size = _share_keys(obj)
    if removed is not None:
        size += sys.getsizeof(removed.packed)
    return kept, removed, size


def strip(obj: dict[str, Any]) -> Removed | None:
    """Drop managedFields and the last-applied annotation from `obj`, in place
    (it is the informer's own copy, fresh from the decoder); what was dropped,
    or None if there was nothing to drop."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return None
    taken: dict[str, Any] = {}
    if "managedFields" in metadata:
        taken["managedFields"] = metadata["managedFields"]
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        taken["lastApplied"] = annotations[LAST_APPLIED]
    if not taken:
        return None
    try:
        packed = json.dumps(taken, separators=(",", ":")).encode()
    except RecursionError:
        return None  # deeper than the encoder goes (an object thousands of levels deep): kept
    metadata.pop("managedFields", None)
    if "lastApplied" in taken:
        del annotations[LAST_APPLIED]
        if not annotations:
            del metadata["annotations"]  # it had only that one; `restore` makes it again
    return Removed(zlib.compress(packed))


# Field names repeat in every object of a kind, but each watch event is decoded
# on its own, so each object would hold its own copies of "metadata",
# "lastTransitionTime" and the rest (a list's items share them: the decoder
# memoizes keys within one document). One table for all, bounded: keys are
# mostly a small vocabulary, but label and data keys are the users'.
_KEYS: dict[str, str] = {}
KEYS_KEPT = 16_384
_SHORT_KEY = 64


def _share_keys(value: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """`value` rebuilt with its keys (at every depth) from the shared table,
    and an estimate of the bytes it holds: sys.getsizeof of its dicts, lists
    and values; shared keys are not counted, they are paid once per kind. One
    walk for both: this runs for every object the informer stores. A loop,
    not recursion: whoever writes an object chooses its depth (the API server
    takes thousands of levels), and a RecursionError here would fail its
    whole kind's watch."""
    keys, getsizeof = _KEYS, sys.getsizeof
    root: dict[str, Any] = {}
    size = 0
    pending: list[tuple[dict[str, Any] | list[Any], dict[str, Any] | list[Any]]] = [(value, root)]
    while pending:
        source, copy = pending.pop()
        size += getsizeof(source)
        if isinstance(copy, dict):
            for key, item in source.items():  # type: ignore[union-attr]
                known = keys.get(key)
                if known is None:
                    known = key
                    size += getsizeof(key)
                    if len(key) <= _SHORT_KEY and len(keys) < KEYS_KEPT:
                        keys[key] = key
                copy[known], item_size = _placed(item, pending)
                size += item_size
        else:
            for item in source:
                placed, item_size = _placed(item, pending)
                copy.append(placed)
                size += item_size
    return root, size


def _placed(item: Any, pending: list[Any]) -> tuple[Any, int]:
    """What the copy holds for `item`: an empty container filled later (its
    size counted then), or the value itself and its size."""
    kind = type(item)
    if kind is dict or kind is list:
        copy: dict[str, Any] | list[Any] = {} if kind is dict else []
        pending.append((item, copy))
        return copy, 0
    if item is None or kind is bool:
        return item, 0  # singletons, held once by the interpreter
    return item, sys.getsizeof(item)


def restore(obj: dict[str, Any], removed: Removed | None) -> dict[str, Any]:
    """`obj` as the API server sent it: a new top level and metadata, the rest
    shared with the stored copy (readers copy before they change anything)."""
    if removed is None:
        return obj
    taken = removed.unpack()
    metadata = dict(obj.get("metadata") or {})
    if "lastApplied" in taken:
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            LAST_APPLIED: taken["lastApplied"],
        }
    if "managedFields" in taken:
        metadata["managedFields"] = taken["managedFields"]
    return {**obj, "metadata": metadata}
