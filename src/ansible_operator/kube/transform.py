"""What an informer keeps of each object: the object as the API server sent it,
packed (compact JSON, zlib), and unpacked for each read.

Why packed rather than the decoded dicts (or dicts with parts dropped, as
controller-runtime's `cache.TransformStripManagedFields` does, and as this
module did before): in Python, an object's containers cost far more than its
text. Held per object (bench/cache_memory.py, tracemalloc, as the watch
delivers them; dicts -> packed): a Deployment as bench/scale.py's role leaves
it 14.6 kB -> 1.2 kB, its Service 8.1 -> 0.9 kB, its ConfigMap 4.7 -> 0.7 kB,
a custom object after `kubectl apply` and a few reconciles 13.2 -> 1.3 kB.
Dropping managedFields and last-applied and sharing field names (the previous
form) took the custom object only to 4.6 kB and the Deployment to 5.5 kB: with
10,000 owners of three dependents each (bench/scale.py), the operator's RSS
grew ~30 kB per owner reconciled, 11-14 kB of it cache and most of the rest
the allocator's arenas pinned by those long-lived dicts among short-lived
ones (live Python objects 115 MiB, RSS 209 MiB at 2,700 owners); packed,
~5 kB per owner.

What that buys besides memory:

- Nothing is dropped: every read (the reconciler's `_<group>_<kind>`, the
  proxy's cached GET and LIST) answers exactly what the server sent,
  managedFields and last-applied included (kubernetes.core's client-side
  `apply` reads last-applied to find the fields a manifest no longer has; a
  role may read managedFields with k8s_info), and listeners see the objects
  as sent, as before any transform.
- Each read is its own copy: no reader can change what another one reads.

What it costs: one encode and compress per object entering the store (some
tens of microseconds for a few kB, about what decoding it from the watch
cost) and one decompress and decode per read (the reconciler reads its object
once per reconcile, a run's `k8s` task once per object it touches; a LIST
unpacks only the namespace it asks for, but a LIST of a whole kind of
thousands of objects blocks the loop for a few tenths of a second).

An object deeper than the JSON encoder recurses (whoever writes a custom
object chooses its depth: the API server takes thousands of levels) is kept
as the dict it came as, and read back as that same dict: a RecursionError
here would fail its whole kind's watch.
"""

from __future__ import annotations

import json
import sys
import zlib
from dataclasses import dataclass
from typing import Any

# zlib's fastest level: 5-10 % bigger than its default on these objects, at a
# third of the time; every object entering the store pays it.
LEVEL = 1


@dataclass(frozen=True, slots=True)
class Held:
    """One object as the store keeps it."""

    version: int | None  # metadata.resourceVersion, compared without unpacking
    size: int  # estimated bytes held, as ansible_operator_cache_bytes reports them
    packed: bytes | None
    whole: dict[str, Any] | None = None  # an object too deep to encode
    bucket: int | None = None  # its shard bucket, in a share's informer (kube/object_share.py)

    def unpack(self) -> dict[str, Any]:
        """The object as the server sent it: a new copy, unless it was too deep to pack."""
        if self.packed is None:
            assert self.whole is not None
            return self.whole
        obj: dict[str, Any] = json.loads(zlib.decompress(self.packed))
        return obj


def hold(obj: dict[str, Any], bucket: int | None = None) -> Held:
    """What the store keeps of `obj` (`bucket`: its shard bucket, kept beside it)."""
    version = resource_version(obj)
    try:
        encoded = json.dumps(obj, separators=(",", ":")).encode()
    except RecursionError:
        return Held(version, _estimate(obj) + _entry_size(obj), None, obj, bucket)
    packed = zlib.compress(encoded, LEVEL)
    return Held(version, sys.getsizeof(packed) + _entry_size(obj), packed, None, bucket)


def resource_version(obj: dict[str, Any] | None) -> int | None:
    if obj is None:
        return None
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


# What each stored object costs beside its bytes: a Held, its version, the
# store's key (a tuple of its namespace and name) and the store's slot for it.
_HELD_OVERHEAD = sys.getsizeof(Held(1 << 40, 0, b"")) + sys.getsizeof(1 << 40)
_ENTRY_OVERHEAD = _HELD_OVERHEAD + sys.getsizeof(("", "")) + 3 * 8 * 3 // 2


def _entry_size(obj: dict[str, Any]) -> int:
    metadata = obj.get("metadata") or {}
    return (
        _ENTRY_OVERHEAD
        + sys.getsizeof(metadata.get("namespace") or "")
        + sys.getsizeof(metadata.get("name") or "")
    )


def _estimate(value: Any) -> int:
    """Bytes held by `value` and everything in it (sys.getsizeof of each part).
    A loop, not recursion: it is only called for objects too deep to encode."""
    size = 0
    pending = [value]
    while pending:
        item = pending.pop()
        size += sys.getsizeof(item)
        if isinstance(item, dict):
            for key, inner in item.items():
                size += sys.getsizeof(key)
                pending.append(inner)
        elif isinstance(item, list):
            pending.extend(item)
    return size
