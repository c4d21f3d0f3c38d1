"""Memory per cached object: N custom objects through an Informer, with and
without the cache transform (kube/transform.py).

    .venv/bin/python bench/cache_memory.py [--objects 10000]

Each object is built as the API server returns it after `kubectl apply` and a
few reconciles: managedFields of kubectl's client-side apply and of the
operator's status writes, the last-applied annotation, a spec of ten fields,
a status with the operator's conditions. It enters the informer as the real
client hands it over: decoded from its own JSON, through the watch path
(`_apply`, one decode per event: the steady state, every object changed once
since the list) and through the list path (`_relist`, one decode for all).
Prints tracemalloc's bytes per object held, the informer's own estimate
(`held_bytes`, what `ansible_operator_cache_bytes` reports) for comparison,
and the CPU time per object to fill the store (JSON decoding included).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from ansible_operator.kube import informer as informer_module
from ansible_operator.kube.informer import Informer
from ansible_operator.kube.types import Resource

RESOURCE = Resource("bench.example.com", "v1", "Widget", "widgets", namespaced=True)
NAMESPACES = 1000


def realistic(index: int) -> dict[str, Any]:
    """One object as the API server returns it after `kubectl apply` and reconciles."""
    namespace = f"team-{index % NAMESPACES:04d}"
    name = f"widget-{index:05d}"
    spec = {
        "size": index % 7 + 1,
        "image": "registry.example.com/widgets/widget:1.4.2",
        "replicas": 3,
        "port": 8080,
        "logLevel": "info",
        "storageClass": "standard",
        "storageSize": "10Gi",
        "enableMetrics": True,
        "owner": f"team-{index % NAMESPACES:04d}@example.com",
        "tier": ("frontend", "backend", "cache")[index % 3],
    }
    applied = {
        "apiVersion": "bench.example.com/v1",
        "kind": "Widget",
        "metadata": {"annotations": {}, "name": name, "namespace": namespace},
        "spec": spec,
    }
    spec_fields = {f"f:{key}": {} for key in spec}
    conditions = [
        {
            "type": condition,
            "status": "True" if condition == "Successful" else "False",
            "reason": "Successful" if condition == "Successful" else "Running",
            "message": "Awaiting next reconciliation" if condition == "Successful" else "",
            "lastTransitionTime": f"2024-05-01T10:00:0{number}Z",
            **(
                {
                    "ansibleResult": {
                        "ok": 4,
                        "changed": 0,
                        "skipped": 1,
                        "failures": 0,
                        "completion": "2024-05-01T10:00:05.123456",
                    }
                }
                if condition == "Successful"
                else {}
            ),
        }
        for number, condition in enumerate(("Running", "Successful", "Failure"))
    ]
    return {
        "apiVersion": "bench.example.com/v1",
        "kind": "Widget",
        "metadata": {
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                    applied, separators=(",", ":")
                )
                + "\n"
            },
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "finalizers": ["bench.example.com/cleanup"],
            "generation": 1,
            "labels": {"app.kubernetes.io/name": "widget", "tier": spec["tier"]},
            "managedFields": [
                {
                    "apiVersion": "bench.example.com/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {
                                ".": {},
                                "f:kubectl.kubernetes.io/last-applied-configuration": {},
                            },
                            "f:labels": {".": {}, "f:app.kubernetes.io/name": {}, "f:tier": {}},
                        },
                        "f:spec": {".": {}, **spec_fields},
                    },
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "time": "2024-05-01T10:00:00Z",
                },
                {
                    "apiVersion": "bench.example.com/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:finalizers": {".": {}, 'v:"bench.example.com/cleanup"': {}}
                        }
                    },
                    "manager": "ansible-operator",
                    "operation": "Update",
                    "time": "2024-05-01T10:00:01Z",
                },
                {
                    "apiVersion": "bench.example.com/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:status": {
                            ".": {},
                            "f:conditions": {},
                            "f:observedGeneration": {},
                        }
                    },
                    "manager": "ansible-operator",
                    "operation": "Update",
                    "subresource": "status",
                    "time": "2024-05-01T10:00:05Z",
                },
            ],
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(100_000 + index),
            "uid": str(uuid.UUID(int=index)),
        },
        "spec": spec,
        "status": {"conditions": conditions, "observedGeneration": 1},
    }


class _Listing:
    """The client's face the list path needs: one decoded answer."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def list(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        listing: dict[str, Any] = json.loads(self.body)
        return listing


def _measure(fill: Callable[[Informer], None], count: int) -> tuple[float, int, float]:
    """tracemalloc's bytes per object held after `fill`, the informer's
    estimate, and CPU microseconds per object to fill (a second fill, untraced)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    informer = Informer(_Listing(b""), RESOURCE)  # type: ignore[arg-type]
    fill(informer)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    estimate = informer.held_bytes // count
    del informer
    gc.collect()
    started = time.process_time()  # CPU: other work on the machine does not count
    fill(Informer(_Listing(b""), RESOURCE))  # type: ignore[arg-type]
    elapsed = time.process_time() - started
    return (after - before) / count, estimate, elapsed / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    count = parser.parse_args().objects
    events = [
        json.dumps({"type": "ADDED", "object": realistic(index)}).encode() for index in range(count)
    ]
    listing = json.dumps(
        {"metadata": {"resourceVersion": "1"}, "items": [realistic(i) for i in range(count)]}
    ).encode()

    def by_watch(informer: Informer) -> None:
        for event in events:
            informer._apply(json.loads(event))

    def by_list(informer: Informer) -> None:
        informer.api = _Listing(listing)  # type: ignore[assignment]
        asyncio.run(informer._relist(None))

    transform = informer_module.transform
    print(f"{count} objects over {NAMESPACES} namespaces; bytes per object held")
    print(f"{'path':<7} {'transform':<10} {'tracemalloc':>12} {'estimate':>10} {'us/object':>10}")
    for path, fill in (("watch", by_watch), ("list", by_list)):
        for transformed in (False, True):
            informer_module.transform = transform if transformed else (lambda obj: (obj, None, 0))
            traced, estimate, micros = _measure(fill, count)
            print(
                f"{path:<7} {'on' if transformed else 'off':<10} "
                f"{traced:>12,.0f} {estimate if transformed else '-':>10} {micros:>10,.1f}"
            )
    informer_module.transform = transform


if __name__ == "__main__":
    main()
